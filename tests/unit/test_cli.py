"""The CLI a person uses: strict by default with "did you mean", a summary line per claim,
--version, `render -`, and KCL refusals shown as the claim's field, not a line of prog.k."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT, load_yaml

from dot_inference import cli


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli.cli, list(args), input=stdin)


def test_version_is_the_project_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    res = invoke("--version")
    assert res.exit_code == 0
    assert res.stdout == f"dot-inference, version {version}\n"


def test_render_reads_standard_input() -> None:
    path = EXAMPLES / "llm-qwen.yaml"
    from_file = invoke("render", str(path), "--quiet")
    from_stdin = invoke("render", "-", "--quiet", stdin=path.read_text())
    assert from_file.exit_code == from_stdin.exit_code == 0
    assert from_stdin.stdout == from_file.stdout and from_stdin.stdout.startswith("---\n")


def _misspelt() -> str:
    claim = copy.deepcopy(load_yaml(EXAMPLES / "llm-qwen.yaml")[0])
    claim["spec"]["parameters"]["ingresHost"] = claim["spec"]["parameters"].pop("ingressHost")
    return yaml.safe_dump(claim)


# (case, extra arguments, exit code, stderr lines, whether anything is rendered)
STRICTNESS = [
    (
        "strict by default",
        [],
        1,
        [
            "dot-inference: invalid: LLMInference a-team/qwen: spec.parameters.ingresHost: unknown "
            'field "ingresHost": not in the schema, so the API server would prune it; did you '
            'mean "ingressHost"?'
        ],
        False,
    ),
    (
        "--lenient renders and warns",
        ["--lenient", "--quiet"],
        0,
        [
            "dot-inference: warning: LLMInference a-team/qwen: spec.parameters.ingresHost: unknown "
            'field "ingresHost": not in the schema, so the API server would prune it; did you '
            'mean "ingressHost"?'
        ],
        True,
    ),
]


@pytest.mark.parametrize(
    ("case", "args", "code", "stderr", "rendered"), STRICTNESS, ids=[c[0] for c in STRICTNESS]
)
def test_a_claim_the_api_server_would_refuse(
    case: str, args: list[str], code: int, stderr: list[str], rendered: bool
) -> None:
    res = invoke("render", "-", *args, stdin=_misspelt())
    assert res.exit_code == code, res.stderr
    assert res.stderr.splitlines() == stderr
    assert bool(res.stdout) is rendered


# (example, its summary line on stderr)
SUMMARIES = [
    (
        "llm-qwen-on-aws.yaml",
        "dot-inference: LLMInference a-team/qwen-14b: Qwen/Qwen2.5-14B-Instruct on 4 x l4 "
        "(21.95 GiB), context 32768, fits, http://qwen.inference-aws.example.com, 5 resources",
    ),
    (
        "llm-kimi.yaml",
        "dot-inference: LLMInference a-team/kimi: moonshotai/Kimi-K2.5 on 8 x an assumed "
        "79.11 GiB GPU, does NOT fit, http://kimi.127.0.0.1.nip.io, 4 resources, 2 warning(s): "
        "moonshotai/Kimi-K2.5 needs about 665 GiB of GPU memory",
    ),
    (
        "cluster-aws.yaml",
        "dot-inference: InferenceCluster a-team/inference-aws: aws, GPU pool l4x4 on g6.12xlarge",
    ),
    (
        "llm-simulated.yaml",
        "dot-inference: LLMInference a-team/chat: Qwen/Qwen2.5-1.5B-Instruct on 1 x l4 "
        "(21.95 GiB), context 32768, fits, simulated (no GPU), 1-3 replicas (KEDA), "
        "http://llm.127.0.0.1.nip.io, 5 resources",
    ),
]


@pytest.mark.parametrize(("example", "line"), SUMMARIES, ids=[s[0] for s in SUMMARIES])
def test_each_rendered_claim_gets_a_summary_line(example: str, line: str) -> None:
    res = invoke("render", str(EXAMPLES / example))
    assert res.exit_code == 0, res.stderr
    (summary,) = res.stderr.splitlines()
    assert summary.startswith(line)
    assert invoke("render", str(EXAMPLES / example), "--quiet").stderr == ""


def test_a_kcl_refusal_names_the_field_not_the_program() -> None:
    cluster = copy.deepcopy(load_yaml(EXAMPLES / "cluster-aws.yaml")[0])
    cluster["spec"]["parameters"]["models"] = [{"model": "org-a/Foo-7B"}, {"model": "org-b/foo-7b"}]
    res = invoke("render", "-", stdin=yaml.safe_dump(cluster))
    assert res.exit_code == 1
    assert res.stderr == (
        "dot-inference: InferenceCluster a-team/inference-aws: spec.parameters.models: "
        "org-a/Foo-7B and org-b/foo-7b would both be the LLMInference inference-aws-foo-7b; set "
        "spec.parameters.models[].name on one of them\n"
    )


def test_claims_render_in_parallel_exactly_as_one_by_one(tmp_path: Path) -> None:
    """A directory renders on every CPU (DOT_INFERENCE_JOBS): the same YAML and the same
    standard error as one claim after another. A directory of both kinds of claim, one with
    cluster state (./task render renders all of examples/ the parallel way)."""
    import os
    import shutil
    import subprocess
    import sys

    (tmp_path / "state").mkdir()
    for name in (
        "cluster-local.yaml",
        "llm-qwen.yaml",
        "llm-embedding.yaml",
        "llm-simulated.yaml",
    ):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    shutil.copy(
        EXAMPLES / "state" / "llm-simulated.yaml", tmp_path / "state" / "llm-simulated.yaml"
    )

    def run(jobs: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "dot_inference.cli", "render", str(tmp_path), "--validate"],
            cwd=ROOT,
            env={**os.environ, "DOT_INFERENCE_JOBS": jobs},
            capture_output=True,
            text=True,
            timeout=120,
        )

    one, two = run("1"), run("2")
    assert one.returncode == two.returncode == 0, two.stderr
    assert two.stdout == one.stdout
    assert two.stderr == one.stderr


def _vllm_off_with_models_still_on_it(tmp_path: Path, keep_ref: bool) -> Any:
    """examples/cluster-existing.yaml with apps.vllm turned off while two objects of models
    still connect with its models' ProviderConfig (provider-kubernetes' status.users)."""
    cluster = copy.deepcopy(load_yaml(EXAMPLES / "cluster-existing.yaml")[0])
    cluster["spec"]["parameters"]["apps"]["vllm"]["enabled"] = False
    if not keep_ref:
        del cluster["spec"]["parameters"]["modelsKubeconfigSecretRef"]
    observed = {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "ProviderConfig",
        "metadata": {
            "name": "inference-existing-models",
            "namespace": "a-team",
            "annotations": {"crossplane.io/composition-resource-name": "providerconfig-models"},
        },
        "status": {"users": 2},
    }
    (tmp_path / "observed.yaml").write_text(yaml.safe_dump(observed))
    return invoke(
        "render", "-", "-o", str(tmp_path / "observed.yaml"), stdin=yaml.safe_dump(cluster)
    )


def test_turning_vllm_off_keeps_the_models_identity_while_models_use_it(tmp_path: Path) -> None:
    res = _vllm_off_with_models_still_on_it(tmp_path, keep_ref=True)
    assert res.exit_code == 0, res.stderr
    kept = [
        d
        for d in yaml.safe_load_all(res.stdout)
        if d and d.get("kind") == "ProviderConfig" and d["metadata"]["name"].endswith("-models")
    ]
    assert kept, "the models' ProviderConfig went while models use it"


def test_dropping_the_models_kubeconfig_while_models_use_it_is_refused(tmp_path: Path) -> None:
    res = _vllm_off_with_models_still_on_it(tmp_path, keep_ref=False)
    assert res.exit_code == 1
    assert res.stderr == (
        "dot-inference: InferenceCluster a-team/inference-existing: "
        "spec.parameters.modelsKubeconfigSecretRef: 2 object(s) of models on this cluster still "
        "connect with it; set it again (the Secret with the kubeconfig of "
        "dot-inference-system/dot-inference-models) until those LLMInferences are deleted\n"
    )
