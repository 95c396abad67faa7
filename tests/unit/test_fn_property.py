"""Whatever the spec, the function answers: resources, or a fatal result that is not an
internal error. Hypothesis feeds random, mostly-wrong specs through the gRPC entry point."""

from __future__ import annotations

import copy
from typing import Any

from conftest import EXAMPLES, control_plane, load_yaml, request, run, select
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from function.cluster import ledger
from function.cluster.peers import REQUIREMENT as PEERS
from function.model.catalog_lookup import catalog_ids

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
    assert_answers(run(request(xr, required=required)))


def assert_answers(rsp: fnv1.RunFunctionResponse) -> None:
    """A fatal result that names the problem (and composes nothing), or resources, or a
    requirement or condition that says what the function waits on."""
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    assert not any("unexpected error" in m for m in fatal), fatal
    if fatal:
        assert len(rsp.desired.resources) == 0 and all(fatal)
    else:
        assert (
            len(rsp.desired.resources) > 0
            or len(rsp.requirements.resources) > 0
            or any(c.type in ("Cluster", "Placement") for c in rsp.conditions)
        )


# From a real llm-d claim on its real cluster (the examples), with fields replaced by values
# near the valid ones and by junk: every path of the llm-d backend, prefill/decode and
# placement answers with resources, a requirement or a fatal result that names the problem.
LLMD_STATE = load_yaml(EXAMPLES / "state" / "llm-disaggregated.yaml")
LLMD_CLUSTER = next(d for d in LLMD_STATE if d["kind"] == "InferenceCluster")
LLMD_PEERS = [d for d in LLMD_STATE if d["kind"] == "LLMInference"]
LLMD_CLAIMS = [
    load_yaml(EXAMPLES / name)[0] for name in ("llm-llmd.yaml", "llm-disaggregated.yaml")
]
small_ints = st.integers(-2, 70)
role = st.fixed_dictionaries({}, optional={"replicas": small_ints, "gpu": small_ints}) | json_values
near_valid = {
    "backend": st.sampled_from(["llmd", "productionStack"]) | json_scalars,
    "llmd": st.fixed_dictionaries(
        {}, optional={"profile": st.sampled_from(["balanced", "load", "x"]) | json_scalars}
    )
    | json_values,
    "disaggregation": st.fixed_dictionaries({}, optional={"prefill": role, "decode": role})
    | json_values,
    "gpu": small_ints | json_scalars,
    "replicas": small_ints | json_scalars,
    "autoscaling": st.fixed_dictionaries(
        {}, optional={"minReplicas": small_ints, "maxReplicas": small_ints}
    )
    | json_values,
    "ingressHost": st.sampled_from(
        ["qwen3.llmd.example.com", "x.svc", "inference-gateway.agentgateway-system"]
    )
    | json_scalars,
    "aliases": st.lists(st.text(max_size=12), max_size=3) | json_values,
    "clusterSelector": st.just({"matchLabels": {"team": "a"}}) | json_values,
    "engine": st.fixed_dictionaries(
        {},
        optional={
            "simulate": st.booleans() | json_scalars,
            "extraArgs": st.lists(
                st.sampled_from(
                    [
                        "--kv-transfer-config",
                        '{"kv_connector":"NixlConnector"}',
                        "--no-disable-hybrid-kv-cache-manager",
                        "--tensor-parallel-size",
                        "2",
                        "--max-model-len=8192",
                    ]
                ),
                max_size=4,
            )
            | json_values,
        },
    )
    | json_values,
}
# One to three fields replaced at a time, so that most claims get past the first refusal.
llmd_fields = st.lists(
    st.one_of([st.fixed_dictionaries({k: v}) for k, v in near_valid.items()]),
    min_size=1,
    max_size=3,
).map(lambda patches: {k: v for p in patches for k, v in p.items()})
cluster_status = st.fixed_dictionaries(
    {},
    optional={
        "apps": st.fixed_dictionaries(
            {}, optional={"llmd": st.booleans() | json_scalars, "lws": st.booleans()}
        ),
        "llmd": json_values,
        "gpu": st.fixed_dictionaries(
            {},
            optional={
                "rdma": json_values | st.just({"enabled": False}),
                "perNode": small_ints | json_scalars,
                "maxNodes": small_ints | json_scalars,
            },
        ),
    },
)


def _merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(range(len(LLMD_CLAIMS))),
    fields=llmd_fields,
    status=cluster_status,
    peers=st.booleans(),
    whole=st.booleans(),
)
def test_the_llmd_backend_always_answers(
    which: int, fields: dict[str, Any], status: dict[str, Any], peers: bool, whole: bool
) -> None:
    xr = copy.deepcopy(LLMD_CLAIMS[which])
    params = xr["spec"]["parameters"]
    params.update(fields)
    if "clusterSelector" in fields:
        params.pop("clusterRef", None)
    cluster = _merged(LLMD_CLUSTER, {"status": status})
    cluster["metadata"]["labels"] = {"team": "a"}
    # The models there as Crossplane selects them: the cluster's ledger and its own models,
    # and (`whole`) every model of the namespace, which placement and a gain read.
    world = control_plane(xr, LLMD_PEERS if peers else [], cluster)
    asked = ledger.requirements("a-team", cluster["metadata"]["name"], cluster)
    required = {
        "inference-cluster": [cluster],
        "inference-clusters": [cluster],
        **{name: select(r, world) for name, r in asked.items()},
    }
    if whole:
        required[PEERS] = [xr, *(LLMD_PEERS if peers else [])]
    assert_answers(run(request(xr, required=required)))


# The adapter's own Struct reader is the SDK's, value for value (only faster).
plain_values = st.recursive(
    st.none()
    | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(-(2**52), 2**52)
    | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(data=st.dictionaries(st.text(max_size=8), plain_values, max_size=6))
def test_struct_to_dict_reads_what_the_sdk_reads(data: dict[str, Any]) -> None:
    from crossplane.function import resource
    from google.protobuf import struct_pb2

    from function.fn import struct_to_dict

    struct = struct_pb2.Struct()
    struct.update(data)
    assert struct_to_dict(struct) == resource.struct_to_dict(struct)
    assert repr(struct_to_dict(struct)) == repr(resource.struct_to_dict(struct)), "same types"


def test_struct_to_dict_refuses_what_the_sdk_refuses() -> None:
    import pytest
    from crossplane.function import resource
    from google.protobuf import struct_pb2

    from function.fn import struct_to_dict

    for bad in (float("inf"), float("nan")):
        struct = struct_pb2.Struct()
        struct.update({"x": [bad]})
        with pytest.raises(ValueError):
            resource.struct_to_dict(struct)
        with pytest.raises(ValueError):
            struct_to_dict(struct)
