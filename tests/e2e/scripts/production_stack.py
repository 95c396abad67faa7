"""The production-stack operator manifest an InferenceCluster installs, for the e2e suites.

    python tests/e2e/scripts/production_stack.py url
    python tests/e2e/scripts/production_stack.py crds [CRD name ...]

`url` prints the operator manifest URL the InferenceCluster Composition applies on a cluster
(`apps.vllm`): found by rendering examples/cluster-local.yaml offline through package/, so
the release it names is the one kcl/versions.k pins (`production_stack_operator`) and
neither the version nor the URL is written a second time. `crds` downloads that manifest
and prints its CustomResourceDefinitions (only the named ones, if names are given), e.g.
the VLLMRuntime CRD that tests/e2e/llm-local needs on a control plane without the operator.
"""

from __future__ import annotations

import re
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cluster-local.yaml"
_URL = re.compile(r"^https://raw\.githubusercontent\.com/vllm-project/production-stack/\S+\.yaml$")


class ProductionStackError(Exception):
    """The render did not say where the operator manifest is, or the download failed."""


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def operator_manifest_url(example: Path = EXAMPLE) -> str:
    """The operator manifest URL in the offline render of `example` (vllm app enabled)."""
    sys.path.insert(0, str(ROOT))
    from dot_inference import render

    pkg = render.load_package(ROOT / "package")
    found: set[str] = set()
    for xr in render.load_objects(example):
        if not render.is_handled_xr(pkg, xr):
            continue
        result = render.render_in_package(pkg, xr)
        if result.fatal:
            raise ProductionStackError(f"{example}: the render failed: {result.fatal}")
        for obj in result.composed:
            found.update(s for s in _strings(obj.get("spec")) if _URL.match(s))
    if len(found) != 1:
        raise ProductionStackError(
            f"{example}: expected one production-stack manifest URL in the render, "
            f"found {sorted(found) or 'none'}"
        )
    return found.pop()


def crds(url: str, names: list[str]) -> list[dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=60) as rsp:
            text = rsp.read().decode()
    except OSError as e:
        raise ProductionStackError(f"cannot download {url}: {e}") from e
    docs = [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
    out = [
        d
        for d in docs
        if d.get("kind") == "CustomResourceDefinition"
        and (not names or (d.get("metadata") or {}).get("name") in names)
    ]
    missing = set(names) - {(d.get("metadata") or {}).get("name") for d in out}
    if missing or not out:
        raise ProductionStackError(f"{url} has no CRD {', '.join(sorted(missing)) or 'at all'}")
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("url", "crds"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        url = operator_manifest_url()
        if argv[0] == "url":
            print(url)
        else:
            sys.stdout.write(yaml.safe_dump_all(crds(url, argv[1:]), sort_keys=False))
    except ProductionStackError as e:
        print(f"production_stack.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
