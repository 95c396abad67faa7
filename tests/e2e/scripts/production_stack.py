"""The production-stack operator CRDs an InferenceCluster installs, for the e2e suites.

    python tests/e2e/scripts/production_stack.py crds [CRD name ...]

Prints the CustomResourceDefinitions (only the named ones, if names are given) that the
InferenceCluster Composition installs with `apps.vllm`: found by rendering
examples/cluster-local.yaml offline through package/, so they are the CRDs of the commit
kcl/versions.k pins (`production_stack_operator`) and nothing is downloaded or written a
second time. tests/e2e/llm-local applies the VLLMRuntime CRD this way on a control plane
without the operator.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cluster-local.yaml"


class ProductionStackError(Exception):
    """The render holds no operator CRDs (apps.vllm off, or a failed render)."""


def installed_crds(example: Path = EXAMPLE) -> list[dict[str, Any]]:
    """The CRD manifests the offline render of `example` wraps in provider-kubernetes Objects."""
    sys.path.insert(0, str(ROOT))
    from dot_inference.crossplane import documents, render

    pkg = documents.load_package(ROOT / "package")
    out: list[dict[str, Any]] = []
    for xr in documents.load_objects(example):
        if not render.is_handled_xr(pkg, xr):
            continue
        result = render.render_in_package(pkg, xr)
        if result.fatal:
            raise ProductionStackError(f"{example}: the render failed: {result.fatal}")
        for obj in result.composed:
            manifest = (obj.get("spec") or {}).get("forProvider", {}).get("manifest") or {}
            if obj.get("kind") == "Object" and manifest.get("kind") == "CustomResourceDefinition":
                out.append(manifest)
    if not out:
        raise ProductionStackError(f"{example}: the render installs no operator CRDs")
    return out


def crds(names: list[str], example: Path = EXAMPLE) -> list[dict[str, Any]]:
    found = [
        c
        for c in installed_crds(example)
        if not names or (c.get("metadata") or {}).get("name") in names
    ]
    missing = set(names) - {(c.get("metadata") or {}).get("name") for c in found}
    if missing:
        raise ProductionStackError(f"the render installs no CRD {', '.join(sorted(missing))}")
    return found


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "crds":
        print(__doc__, file=sys.stderr)
        return 2
    try:
        sys.stdout.write(yaml.safe_dump_all(crds(argv[1:]), sort_keys=False))
    except ProductionStackError as e:
        print(f"production_stack.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
