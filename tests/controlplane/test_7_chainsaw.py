"""The chainsaw suites of tests/e2e, run on the plane by chainsaw itself (built from its module
at devbox.json's release, `chainsaw` in dot_inference/controlplane/build.py).

Every step runs that needs none of what the plane lacks: an HTTP data plane (kwok runs no
container, so nothing answers through a router or a Gateway), chart downloads (provider-helm
is not run and no chart repository is reachable), a cloud account, or Docker (a second KinD
cluster). Those steps, and the operations of a step that need them, are left out of a copy of
the suite, each with its reason printed (`NOT_HERE`). The suites are written for KinD, which
has no GPU ("composed, scheduled nowhere, so not Ready"): the plane's GPU nodes are cordoned
while chainsaw runs, as KinD's would be absent."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import binary

from dot_inference.controlplane.kube import Kube
from dot_inference.controlplane.plane import Plane

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests" / "e2e"
SUITES = sorted(p.parent.name for p in E2E.glob("*/chainsaw-test.yaml"))

DATA_PLANE = "data plane: HTTP through {} (kwok runs no container: nothing answers)"
CHARTS = "charts: {} (provider-helm is not run here and no chart repository can be reached)"
CLOUD = "cloud: the Secret {} and an account of that cloud (no cloud provider runs here)"
SECOND_CLUSTER = "Docker: the second KinD cluster's Secrets (`kind-second-cluster.sh`)"
AFTER_SECOND = "needs the second cluster, whose Secrets the first step writes (not here)"

# What is left out, by (suite, step) or (suite, step, file of one operation), and why.
NOT_HERE: dict[tuple[str, ...], str] = {
    ("llm-local", "vllmruntime-crd"): "downloads the CRD from GitHub: the plane installs it "
    "from schemas/ at the same pin",
    ("local", "ready"): CHARTS.format("the apps are Helm releases"),
    ("local", "one-endpoint"): DATA_PLANE.format("the router and Traefik"),
    ("local", "session-routing"): DATA_PLANE.format("the router"),
    ("local", "autoscaling"): DATA_PLANE.format("the router (the load KEDA scales on)"),
    ("local", "simulated-models", "09-assert-simulated-ready.yaml"): CHARTS.format(
        "the simulated models are Ready when the router (a chart) routes to them"
    ),
    ("llmd-local", "ready"): CHARTS.format("the Gateway is programmed by agentgateway"),
    ("llmd-local", "model", "05-assert-model-ready.yaml"): CHARTS.format(
        "the model's HTTPRoute is accepted by agentgateway"
    ),
    ("llmd-local", "through-the-gateway"): DATA_PLANE.format("the Gateway"),
    ("fleet-local", "second-cluster-secrets"): SECOND_CLUSTER,
    **{
        ("fleet-local", step): AFTER_SECOND
        for step in (
            "install",
            "composed",
            "ready",
            "fleet-model",
            "through-the-global-endpoint",
            "lose-a-cluster",
            "models-gone",
        )
    },
    **{
        key: reason
        for cloud, secret in (
            ("aws", "aws-creds"),
            ("azure", "azure-creds"),
            ("google", "gcp-creds"),
        )
        for key, reason in (
            ((cloud, "credentials"), CLOUD.format(secret)),
            ((cloud, "ready"), CLOUD.format(secret) + ": the cluster comes up there"),
            (
                (cloud, "disable-vllm", "04-error-vllm-removed.yaml"),
                CHARTS.format("the chart's operator Deployment is removed by the uninstall"),
            ),
        )
    },
}


def _steps(suite: str) -> list[dict[str, Any]]:
    return yaml.safe_load((E2E / suite / "chainsaw-test.yaml").read_text())["spec"]["steps"]


def _files(op: dict[str, Any]) -> set[str]:
    return {v["file"] for v in op.values() if isinstance(v, dict) and "file" in v}


def copy_here(suite: str, into: Path) -> tuple[Path, list[str]]:
    """A copy of `suite` under `into` without what cannot run here, and the lines that say
    what was left out and why."""
    test = yaml.safe_load((E2E / suite / "chainsaw-test.yaml").read_text())
    kept, said = [], []
    applied: set[str] = set()
    for step in test["spec"]["steps"]:
        why = NOT_HERE.get((suite, step["name"]))
        if why:
            said.append(f"{suite}: step {step['name']}: {why}")
            # Its deletes of what a step that ran applied stay: they undo it (local's
            # autoscaling step deletes the simulated models before disable-vllm takes their
            # cluster's vLLM away).
            deletes = [op for op in step["try"] if "delete" in op and _files(op) <= applied]
            if deletes:
                said.append(f"{suite}: step {step['name']}: only its deletes run")
                kept.append(step | {"try": deletes})
            continue
        ops = []
        for op in step["try"]:
            drop = next(
                (
                    NOT_HERE[(suite, step["name"], f)]
                    for f in _files(op)
                    if (suite, step["name"], f) in NOT_HERE
                ),
                None,
            )
            if drop:
                said.append(
                    f"{suite}: step {step['name']}, {', '.join(sorted(_files(op)))}: {drop}"
                )
            else:
                ops.append(op)
                if "apply" in op or "create" in op:
                    applied |= _files(op)
        kept.append(step | {"try": ops})
    test["spec"]["steps"] = kept
    folder = into / suite
    shutil.copytree(E2E / suite, folder)
    (folder / "chainsaw-test.yaml").write_text(yaml.safe_dump(test, sort_keys=False))
    scripts = into / "scripts"
    if not scripts.exists():
        scripts.symlink_to(E2E / "scripts")
    return folder, said


def test_every_step_left_out_exists_and_says_why() -> None:
    """The table cannot name a step (or an operation's file) a suite no longer has."""
    known = set()
    for suite in SUITES:
        for step in _steps(suite):
            known.add((suite, step["name"]))
            for op in step["try"]:
                known |= {(suite, step["name"], f) for f in _files(op)}
    assert set(NOT_HERE) <= known, sorted(set(NOT_HERE) - known)
    assert all(NOT_HERE.values())


def errors(out: str) -> str:
    """Chainsaw's failed operations with what each says (an assertion's diff), which a long run's
    tail (its catch and cleanup) leaves out: from each line of status ERROR to the next line."""
    blocks: list[str] = []
    taking = False
    for line in out.splitlines():
        if "sink.go" in line:
            # | time | suite | step | operation | status | object: the status, not chainsaw's
            # `error` operations (which pass when what they name is absent).
            cells = [c.strip() for c in line.split("|")]
            taking = len(cells) > 5 and cells[5] == "ERROR"
        if taking:
            blocks.append(line)
    return "\n".join(blocks)[:12000] or "(no operation said ERROR)"


@pytest.fixture(scope="module")
def without_gpus(kube: Kube) -> Any:
    """The plane as KinD is to these suites: no GPU node to schedule on (cordoned)."""
    gpu_nodes = [
        n["metadata"]["name"]
        for n in kube.list("v1", "Node")
        if "nvidia.com/gpu" in (n.get("status", {}).get("capacity") or {})
    ]
    for name in gpu_nodes:
        kube.patch("v1", "Node", name, None, {"spec": {"unschedulable": True}})
    yield gpu_nodes
    for name in gpu_nodes:
        kube.patch("v1", "Node", name, None, {"spec": {"unschedulable": None}})


@pytest.mark.parametrize("suite", SUITES)
def test_the_suite_s_steps_that_can_run_here_pass(
    suite: str,
    plane: Plane,
    kube: Kube,
    without_gpus: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder, said = copy_here(suite, tmp_path)
    with capsys.disabled():
        for line in said:
            print(f"\nchainsaw: not here: {line}", end="")
        print()
    steps = yaml.safe_load((folder / "chainsaw-test.yaml").read_text())["spec"]["steps"]
    if not steps:
        pytest.skip(f"{suite}: no step can run here (above)")
    chainsaw = binary("chainsaw", "chainsaw")
    kubectl = binary("kubernetes", "kubectl")
    env = os.environ | {
        "KUBECONFIG": str(plane.kubeconfig),
        "PATH": f"{kubectl.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    # Bounded: on the plane, composition takes seconds and deletion no cloud's minutes. A
    # cluster's deletion goes app by app (its Usages) and took over 5 minutes on a loaded
    # machine; a cleanup cut short then deletes the test's namespace under provider-
    # kubernetes' Objects, which can never finish (each must write a ProviderConfigUsage in that
    # namespace: "forbidden ... because it is being terminated"), so deletes get 10.
    timeouts = {
        "apply": "1m",
        "assert": "3m",
        "error": "2m",
        "delete": "10m",
        "cleanup": "10m",
        "exec": "2m",
    }
    argv = [
        str(chainsaw),
        "test",
        "--test-dir",
        str(folder),
        "--config",
        str(ROOT / ".chainsaw.yaml"),
        "--values",
        str(E2E / "values.yaml"),
        "--no-color",
        "--report-format",
        "JSON",
        "--report-path",
        str(tmp_path),
        "--report-name",
        "report",
    ] + [f"--{k}-timeout={v}" for k, v in timeouts.items()]
    run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    out = run.stdout + run.stderr
    assert run.returncode == 0, (
        f"chainsaw on {suite} failed:\n{errors(out)}\n--- the run's end:\n{out[-8000:]}"
    )
    report = json.loads((tmp_path / "report.json").read_text())
    # The report lists every step run, then chainsaw's own cleanups ("cleanup (install)",
    # "@cleanup").
    ran = [
        (s["name"], s["status"])
        for t in report.get("tests", [])
        for s in t.get("steps", [])
        if not s["name"].startswith(("@", "cleanup ("))
    ]
    assert ran == [(s["name"], "passed") for s in steps], out[-4000:]
