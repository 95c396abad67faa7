"""llm-d's scheduling profiles and prefill/decode settings (llmd.yaml): which profile a claim
may choose (spec.parameters.llmd.profile) and what each means to the endpoint picker, which
the llm-d backend (function/backends/llmd/) renders."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from function import datafile

DATA_PATH = Path(__file__).with_name("llmd.yaml")


@functools.cache
def data() -> dict[str, Any]:
    return datafile.load(DATA_PATH)


def profiles() -> tuple[str, ...]:
    """The scheduling profiles a claim may choose, the default first."""
    names = list(data()["profiles"])
    default = data()["default"]
    return (default, *(n for n in names if n != default))


DEFAULT_PROFILE: str = data()["default"]

# How long vLLM keeps an idle HTTP connection (uvicorn's timeout_keep_alive; vllm/envs.py
# VLLM_HTTP_TIMEOUT_KEEP_ALIVE, default 5 s). Its clients keep idle connections longer: the
# routing sidecar 90 s toward prefill and its own vLLM (llm-d-router v0.10.0
# pkg/sidecar/proxy/proxy.go IdleConnTimeout), agentgateway 90 s toward every pod (v1.4.1
# crates/agentgateway/src/lib.rs pool idle). A connection vLLM closed first is reset when a
# client reuses it, so vLLM keeps them 120 s, as llm-d's P/D guide sets on prefill pods
# (guides/pd-disaggregation, disaggregatedset.yaml).
KEEP_ALIVE_ENV = "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"
CLIENT_IDLE_S = 90
KEEP_ALIVE_S = 120
