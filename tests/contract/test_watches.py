"""Objects that ask provider-kubernetes to watch (`watch: true`: a download finishing, an
engine turning Ready) are watched only when the provider runs with `--enable-watches`
(provider-kubernetes v1.2.1 cmd/provider/main.go, default false: the Object waits for the
next poll). install/provider-runtime.yaml gives the provider the Configuration installs that
flag, through an ImageConfig matching its package; the end-to-end control plane's own
runtime config has it too."""

from __future__ import annotations

from typing import Any

import yaml
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.apiserver import validate_objects
from dot_inference.crossplane import documents, render

ROOT = PACKAGE.parent
RUNTIME = load_yaml(ROOT / "install" / "provider-runtime.yaml")
E2E_RUNTIME = load_yaml(ROOT / "tests" / "e2e" / "setup" / "runtime.yaml")


def _args(drc: dict[str, Any]) -> list[str]:
    containers = drc["spec"]["deploymentTemplate"]["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == "package-runtime").get("args", [])


def _kubernetes_package() -> str:
    meta = yaml.safe_load((PACKAGE / "crossplane.yaml").read_text())
    return next(
        d["package"]
        for d in meta["spec"]["dependsOn"]
        if d.get("package", "").endswith("/provider-kubernetes")
    )


def test_the_install_runtime_config_turns_watches_on_for_the_packages_provider() -> None:
    report = validate_objects(RUNTIME)
    assert report.ok, report.summary()
    drc = next(d for d in RUNTIME if d["kind"] == "DeploymentRuntimeConfig")
    image = next(d for d in RUNTIME if d["kind"] == "ImageConfig")
    assert "--enable-watches" in _args(drc)
    assert image["spec"]["matchImages"] == [{"type": "Prefix", "prefix": _kubernetes_package()}]
    assert image["spec"]["runtime"]["configRef"]["name"] == drc["metadata"]["name"]


def test_the_end_to_end_provider_runs_with_watches() -> None:
    drc = next(
        d
        for d in E2E_RUNTIME
        if d["kind"] == "DeploymentRuntimeConfig" and d["metadata"]["name"] == "provider-kubernetes"
    )
    assert "--enable-watches" in _args(drc)


def test_examples_ask_for_watches_that_the_runtime_config_enables() -> None:
    """The reason for the flag: rendered examples do set `watch: true`."""
    pkg = documents.load_package(PACKAGE)
    watched = []
    for name in ("llm-qwen-on-aws.yaml", "llm-autoscaled.yaml"):
        xr = load_yaml(EXAMPLES / name)[0]
        state = load_yaml(EXAMPLES / "state" / name)
        result = render.render_in_package(pkg, xr, required=state)
        assert result.fatal is None, result.fatal
        watched += [o for o in result.composed if o["kind"] == "Object" and o["spec"].get("watch")]
    assert watched


def test_the_install_guide_applies_it_before_the_configuration() -> None:
    readme = (ROOT / "docs" / "operations.md").read_text()
    runtime = readme.index("kubectl apply -f install/provider-runtime.yaml")
    assert runtime < readme.index("kind: Configuration")
