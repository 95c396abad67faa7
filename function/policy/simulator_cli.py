"""llm-d's inference simulator in place of vLLM (`spec.parameters.engine.simulate`).

A CPU-only, OpenAI-compatible server that answers like vLLM and exports vLLM's metrics
(`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`, labelled `model_name` = the first
served name): the router discovers it, routes to it and KEDA scales it exactly as it would
a GPU engine, on a laptop. The production-stack operator runs `/opt/venv/bin/vllm serve`,
which the simulator image does not have, so a simulated model is a Deployment and a Service
of our own (simulator.simulator_deployment, resources.engine_service), with the engine's
labels so that the router finds it.

Its flags are read from `simulator_flags.yaml` (the parser of the pinned release): the
claim's `engine.extraArgs` go to the simulator, so each must be a flag it declares, with a
value of the kind it parses; an unknown flag would stop it at start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from function import datafile
from function.policy import engine_args
from function.policy.engine_args import Problem
from function.policy.lora_args import simulator_lora_args

_DATA = datafile.load(Path(__file__).with_name("simulator_flags.yaml"))
VERSION: str = str(_DATA["version"])
FLAGS: dict[str, str] = {f"--{name}": kind for name, kind in _DATA["flags"].items()}

P = "spec.parameters"
PORT = 8000
# What a simulated replica requests: the simulator is one static Go binary serving HTTP
# (its image is distroless, user 65532); no GPU. Requests are small so that a laptop's KinD
# node holds several replicas; the memory limit bounds its in-memory KV-cache simulation.
REQUESTS = {"cpu": "100m", "memory": "128Mi"}
LIMITS = {"memory": "512Mi"}
# Latency defaults that make a replica behave like a loaded engine (requests take time, so
# concurrent ones queue once --max-num-seqs run): 200 ms to the first token, 20 ms per
# token after it. The claim's extraArgs come later on the command line and win.
DEFAULT_LATENCY = ("--time-to-first-token", "200ms", "--inter-token-latency", "20ms")

# Flags the function sets (or that would let the simulator serve something else).
OWNED: dict[str, str] = {
    "--model": f"{P}.model: the simulator serves the claim's model",
    "--served-model-name": f"{P}.model and {P}.aliases: the names the model answers to",
    "--port": "the engine's Service and the router reach port 8000",
    "--config": "a config file could set what the function owns; write the flags directly",
}

_UNIT = r"(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)"
_GO_DURATION = re.compile(rf"^(?:{_UNIT})+$")
_INT = re.compile(r"^[-+]?\d+$")
_FLOAT = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_BOOL = ("true", "false", "1", "0", "t", "f", "TRUE", "FALSE", "True", "False", "T", "F")


def _value_ok(kind: str, value: str) -> bool:
    if kind == "int":
        return bool(_INT.match(value))
    if kind == "float":
        return bool(_FLOAT.match(value))
    if kind == "duration":
        return value == "0" or bool(_GO_DURATION.match(value))
    if kind == "bool":
        return value in _BOOL
    return True


def problems(args: Sequence[str]) -> list[Problem]:
    """Every extraArg the simulator would refuse (or that the function owns), with its
    field. The simulator's parser is pflag: long flags spelled exactly (no underscores, no
    abbreviations), `--flag value` or `--flag=value`; bool flags take no separate value."""
    out: list[Problem] = []
    i = 0
    while i < len(args):
        arg = args[i]
        where = f"{P}.engine.extraArgs[{i}]"
        shape = engine_args.secret_shape(arg)
        if shape:
            out.append(
                Problem(
                    where,
                    f"{where}: looks like {shape}; a credential written in extraArgs is "
                    "readable in the LLMInference, its Deployment and status",
                )
            )
            i += 1
            continue
        flag, eq, inline = arg.partition("=")
        if not flag.startswith("--"):
            out.append(
                Problem(
                    where,
                    f"{where}: {arg!r} is not a flag of the inference simulator "
                    f"{VERSION}; with {P}.engine.simulate, extraArgs go to the simulator "
                    "(e.g. --max-num-seqs 2, --time-to-first-token 500ms)",
                )
            )
            i += 1
            continue
        if flag in OWNED:
            out.append(Problem(where, f"{where}: {flag} is not yours to set: {OWNED[flag]}"))
            i += 1
            while not eq and i < len(args) and not args[i].startswith("--"):
                i += 1  # its values
            continue
        kind = FLAGS.get(flag)
        if kind is None:
            out.append(
                Problem(
                    where,
                    f"{where}: {flag} is not a flag of the inference simulator {VERSION} "
                    f"(llm-d-inference-sim); with {P}.engine.simulate, extraArgs go to the "
                    "simulator, which stops on an unknown flag. Its flags include "
                    "--max-num-seqs, --time-to-first-token, --inter-token-latency, "
                    "--max-waiting-queue-length, --enable-kvcache, --kv-cache-size",
                )
            )
            i += 1
            continue
        if kind == "list":
            i += 1
            while i < len(args) and not args[i].startswith("--"):
                i += 1
            continue
        if eq:
            value, consumed = inline, 1
        elif kind == "bool":
            value, consumed = "true", 1
        elif i + 1 < len(args):
            value, consumed = args[i + 1], 2
        else:
            out.append(Problem(where, f"{where}: {flag} needs a value"))
            break
        if not _value_ok(kind, value):
            example = {"int": "4", "float": "1.5", "duration": "200ms", "bool": "true"}
            out.append(
                Problem(
                    where,
                    f"{where}: {flag} {value!r} is not {'an' if kind == 'int' else 'a'} "
                    f"{kind} the simulator parses (e.g. {example.get(kind, 'a word')})",
                )
            )
        i += consumed
    return out


def command(
    *,
    model: str,
    served_names: Sequence[str],
    max_model_len: int | None,
    max_num_seqs: int | None,
    kv_cache: bool,
    extra_args: Sequence[str],
    adapters: tuple[tuple[str, str], ...] = (),
) -> list[str]:
    """The simulator's arguments (its image's entrypoint is the simulator itself)."""
    args = ["--model", model, "--served-model-name", *served_names, "--port", str(PORT)]
    # The simulator tokenizes a real model id through Hugging Face and a vLLM render
    # sidecar unless told not to: a simulation needs neither.
    args.append("--force-dummy-tokenizer")
    if max_model_len:
        args += ["--max-model-len", str(max_model_len)]
    if max_num_seqs:
        args += ["--max-num-seqs", str(max_num_seqs)]
    if kv_cache:
        # vllm:kv_cache_usage_perc stays 0 unless the simulator keeps a KV cache.
        args.append("--enable-kvcache")
    # spec.parameters.adapters: each adapter's name answers too (function/policy/lora_args.py).
    args += simulator_lora_args(adapters)
    return args + list(DEFAULT_LATENCY) + list(extra_args)
