"""Whatever the spec, the function answers: resources, or a fatal result that is not an
internal error. Hypothesis feeds random, mostly-wrong specs through the gRPC entry point."""

from __future__ import annotations

from typing import Any

from conftest import request, run
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from function.catalog import catalog_ids

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
models = (
    st.sampled_from(catalog_ids())
    | st.from_regex(
        r"[A-Za-z0-9]{1,8}/[A-Za-z0-9.-]{0,10}(\d{1,4}(\.\d)?[BbMm])?(-A\d{1,2}B)?[A-Za-z-]{0,8}",
        fullmatch=True,
    )
    | json_values
)
gpus = st.none() | st.integers(-4, 40) | st.sampled_from([1, 2, 4, 8]) | json_values
clusters = st.none() | st.fixed_dictionaries(
    {
        "status": st.fixed_dictionaries(
            {
                "providerConfigName": st.text(max_size=8) | json_scalars,
                "gpu": st.fixed_dictionaries(
                    {
                        "memoryGiB": json_scalars | st.floats(0, 200),
                        "perNode": json_scalars | st.integers(0, 16),
                    }
                ),
            }
        ),
        "spec": json_values
        | st.just({"parameters": {"gpu": {"enabled": True}, "apps": {"vllm": {"enabled": True}}}}),
    }
)
params = st.fixed_dictionaries(
    {"model": models},
    optional={
        "gpu": gpus,
        "ingressHost": st.from_regex(r"[a-z0-9.-]{1,20}", fullmatch=True) | json_scalars,
        "providerConfigName": json_scalars,
        "targetNamespace": json_scalars,
        "clusterRef": st.just({"name": "gpus"}) | json_values,
        "hfTokenSecretRef": json_values,
        "engine": st.fixed_dictionaries(
            {},
            optional={
                "image": json_scalars,
                "maxModelLen": json_scalars,
                "extraArgs": json_values,
                "env": json_values,
            },
        )
        | json_values,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params=params, cluster=clusters, name=st.text(max_size=12) | st.just("llm"))
def test_function_always_answers(params: dict[str, Any], cluster: Any, name: str) -> None:
    xr = {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": "a-team"},
        "spec": {"parameters": params},
    }
    required = {"inference-cluster": [cluster]} if cluster is not None else None
    rsp = run(request(xr, required=required))
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    assert not any("unexpected error" in m for m in fatal), fatal
    if fatal:
        assert len(rsp.desired.resources) == 0 and all(fatal)
    else:
        # Either something was composed, or the function is waiting on the cluster lookup.
        assert (
            len(rsp.desired.resources) > 0
            or len(rsp.requirements.resources) > 0
            or any(c.type == "Cluster" for c in rsp.conditions)
        )
