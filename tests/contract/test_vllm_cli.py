"""Every `vllm serve` command line the function renders is one vLLM's own parser accepts, at
the vLLM release inside the pinned engine image (function/policy/vllm_flags.yaml, generated from
that release's source by dot_inference/vllm_flags/; function/policy/vllm_cli.py parses as its
FlexibleArgumentParser does).

The commands are taken from every example as the package renders it: a VLLMRuntime's as
the production-stack operator builds it (production_stack.engine_command, the operator's order),
a LeaderWorkerSet's leader and workers as the kubelet passes them (the $(LWS_*) variables
filled in)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, ROOT, load_yaml

from dot_inference.crossplane.documents import load_package
from dot_inference.crossplane.render import render_in_package
from function.backends import production_stack
from function.policy import vllm_cli

VERSIONS = (ROOT / "kcl" / "versions.k").read_text()


def test_the_flags_are_those_of_the_vllm_in_the_engine_image() -> None:
    pinned = re.search(r'^vllm_version = "([^"]+)"', VERSIONS, re.MULTILINE)
    assert pinned and pinned.group(1) == vllm_cli.VERSION


def _manifests(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["forProvider"]["manifest"] if obj["kind"] == "Object" else obj


def _commands() -> list[tuple[str, list[str]]]:
    """(where, the arguments after `vllm serve <model>`) for every engine of every example."""
    pkg = load_package(PACKAGE)
    out = []
    for path in sorted(EXAMPLES.glob("llm-*.yaml")):
        state = EXAMPLES / "state" / path.name
        required = load_yaml(state) if state.exists() else []
        for xr in load_yaml(path):
            result = render_in_package(pkg, xr, required=required)
            assert result.fatal is None, f"{path.name}: {result.fatal}"
            for obj in result.composed:
                m = _manifests(obj)
                if m.get("kind") == "VLLMRuntime":
                    out.append((path.name, production_stack.engine_command(m)[3:]))
                elif m.get("kind") == "LeaderWorkerSet":
                    group = m["spec"]["leaderWorkerTemplate"]
                    for role, index in (("leaderTemplate", 0), ("workerTemplate", 1)):
                        c = group[role]["spec"]["containers"][0]
                        args = [
                            a.replace("$(LWS_WORKER_INDEX)", str(index)).replace(
                                "$(LWS_LEADER_ADDRESS)", "leader.example"
                            )
                            for a in c["args"][1:]
                        ]
                        out.append((f"{path.name} {role}", args))
                elif m.get("kind") == "StatefulSet":  # an llm-d model's pods
                    c = m["spec"]["template"]["spec"]["containers"][0]
                    assert c["command"] == ["vllm", "serve"]
                    role = m["metadata"]["labels"]["llm-d.ai/role"]
                    out.append((f"{path.name} {role}", c["args"][1:]))
    return out


COMMANDS = _commands()


def test_the_examples_have_both_kinds_of_engine() -> None:
    assert any("leaderTemplate" in w for w, _ in COMMANDS)
    assert any("workerTemplate" in w for w, _ in COMMANDS)
    for role in ("prefill-decode", "prefill", "decode"):  # llm-d: aggregated, and disaggregated
        assert any(w.endswith(f" {role}") for w, _ in COMMANDS), role
    assert sum(1 for w, _ in COMMANDS if " " not in w) >= 5


@pytest.mark.parametrize(("where", "args"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_vllm_accepts_every_rendered_command_line(where: str, args: list[str]) -> None:
    # The operator's `$(HF_TOKEN)` (--api-key from the Secret variable) is expanded by the
    # kubelet too: any string is a valid key.
    assert vllm_cli.problems([a.replace("$(HF_TOKEN)", "key") for a in args]) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--tensor-parallel-size", "eight"], "invalid int value: 'eight'"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (["--kv-cache-dtype", "fp4"], "invalid choice: 'fp4'"),
        (["--max-model-len"], "expected one argument"),
        (["--enable-p"], "ambiguous option"),
        (["--limit-mm-per-prompt", "{image: 4"], "--limit-mm-per-prompt"),
        (["--disable-log-requests"], "unrecognized arguments: --disable-log-requests"),
        (["a/second-model"], "unrecognized arguments: a/second-model"),
    ],
)
def test_the_parser_refuses_what_vllm_refuses(args: list[str], says: str) -> None:
    found = vllm_cli.problems(args)
    assert found and any(says in p for p in found), found


def test_aliases_prefixes_and_negations_are_read_as_vllm_reads_them() -> None:
    ok = [
        "-tp",
        "8",
        "--tensor_parallel_size=8",
        "--gpu-memory-util",
        "0.9",
        "--no-enable-prefix-caching",
        "--max-model-len",
        "32k",
        "--served-model-name",
        "a",
        "b",
        "--max-model-len",
        "auto",
    ]
    assert vllm_cli.problems(ok) == []
