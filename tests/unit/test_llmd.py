"""The llm-d backend (backend: llmd): a model's vLLM pods behind an InferencePool, its endpoint
picker and an HTTPRoute on the cluster's Gateway; prefill and decode apart over NIXL with
disaggregation. The same sizing, cache, readiness and tenancy rules as the production stack;
every refusal names the field and what would work."""

from __future__ import annotations

import copy
import json
from typing import Any

import hub_server
import pytest
from conftest import (
    EXAMPLES,
    control_plane,
    engine_image,
    llmd_images,
    load_yaml,
    parse_yaml,
    ready_object,
    settle,
    simulator_image,
)

from dot_inference.apiserver import validate_objects
from function.backends.llmd import objects as llmd
from function.backends.llmd import picker as epp
from function.cluster.peers import REQUIREMENT as PEERS
from function.cluster.place import PLACEMENT_REQUIREMENT
from function.compose import compose
from function.keys import (
    INGRESS,
    LLMD_ENGINE,
    LLMD_PICKER,
    LLMD_POOL,
    LLMD_ROUTE,
    RUNTIME,
    SCALER,
    SIMULATOR,
)
from function.model import sizing
from function.model.hub import HubAnswer
from function.outcome import Inputs, Outcome
from function.policy import engine_args, llmd_profiles, vllm_cli

STATE = load_yaml(EXAMPLES / "state" / "llm-disaggregated.yaml")
CLUSTER = next(d for d in STATE if d["kind"] == "InferenceCluster")
PEER = next(d for d in STATE if d["kind"] == "LLMInference")
NS = "a-team"


def cluster(**status: Any) -> dict[str, Any]:
    """The llm-d cluster of the examples, with parts of its status replaced."""
    c = copy.deepcopy(CLUSTER)
    for path, value in status.items():
        node = c["status"]
        *parents, last = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    return c


def claim(model: str = "Qwen/Qwen2.5-7B-Instruct", name: str = "qwen", **params: Any) -> dict:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "parameters": {
                "model": model,
                "backend": "llmd",
                "clusterRef": {"name": "inference-llmd"},
                **params,
            }
        },
    }


def run(xr: dict, state: dict | None = None, peers: list[dict] | None = None, **kw: Any) -> Outcome:
    return settle(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            **llmd_images(),
            **kw,
        ),
        control_plane(xr, peers or [], state or cluster()),
    )


def manifests(out: Outcome) -> dict[str, dict[str, Any]]:
    """Composition key (without the target's suffix) -> the manifest its Object wraps."""
    return {
        k.rsplit("-", 1)[0]: o["spec"]["forProvider"]["manifest"]
        for k, o in out.resources.items()
        if o["kind"] == "Object"
    }


def of_kind(out: Outcome, kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests(out).values() if m["kind"] == kind]


def engine(out: Outcome, role: str) -> dict[str, Any]:
    (sts,) = [
        m for m in of_kind(out, "StatefulSet") if m["metadata"]["labels"][llmd.ROLE_LABEL] == role
    ]
    return sts


def valid(out: Outcome) -> None:
    report = validate_objects(list(out.resources.values()))
    assert report.ok, report.summary()


def test_an_aggregated_model_is_pods_a_pool_a_picker_and_a_route() -> None:
    out = run(claim(replicas=2, ingressHost="qwen.example.com"))
    assert out.fatal is None, out.fatal
    valid(out)
    kinds = sorted(m["kind"] for m in manifests(out).values())
    assert kinds == sorted(
        [
            "StatefulSet",
            "Service",  # the pods' headless Service
            "InferencePool",
            "Deployment",  # the endpoint picker
            "Service",  # its Service
            "ConfigMap",  # its configuration
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "HTTPRoute",
        ]
    )
    assert not [k for k in out.resources if k.startswith((RUNTIME, INGRESS))], "no production stack"
    sts = engine(out, "prefill-decode")
    pool = of_kind(out, "InferencePool")[0]
    pod = sts["spec"]["template"]
    # The pool selects the pods; the picker is the pool's, reached on its gRPC port.
    assert pool["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    picker = next(m for m in of_kind(out, "Deployment"))
    service = next(m for m in of_kind(out, "Service") if m["metadata"]["name"] == "qwen-epp")
    ref = pool["spec"]["endpointPickerRef"]
    assert (ref["name"], ref["port"]["number"]) == (service["metadata"]["name"], 9002)
    assert (
        service["spec"]["selector"].items()
        <= picker["spec"]["template"]["metadata"]["labels"].items()
    )
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--pool-name") + 1] == pool["metadata"]["name"]
    assert args[args.index("--pool-namespace") + 1] == NS
    assert picker["spec"]["template"]["spec"]["serviceAccountName"] == "qwen-llm-d"
    (role,) = of_kind(out, "Role")
    assert all(set(r["verbs"]) == {"get", "list", "watch"} for r in role["rules"]), "reads only"
    # The route: the cluster's Gateway, the claim's host, the pool as backend.
    (route,) = of_kind(out, "HTTPRoute")
    gateway = CLUSTER["status"]["llmd"]["gateway"]
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": gateway["name"],
            "namespace": gateway["namespace"],
        }
    ]
    assert route["spec"]["hostnames"] == ["qwen.example.com"]
    rule = route["spec"]["rules"][0]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "qwen"}
    ]
    assert "filters" not in rule
    # Two pods, each with a cache of its own filled before vLLM starts.
    assert sts["spec"]["replicas"] == 2
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["model-fetch"]
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "model-cache"
    vllm = pod["spec"]["containers"][0]
    assert vllm["command"] == ["vllm", "serve"] and vllm["args"][0] == "Qwen/Qwen2.5-7B-Instruct"
    assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(vllm)
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert vllm_cli.problems(vllm["args"][1:]) == []
    status = out.status
    assert status["plan"]["backend"] == "llmd" and status["endpoint"] == "http://qwen.example.com"
    assert status["llmd"]["inferencePool"] == "qwen" and status["llmd"]["profile"] == "balanced"
    assert status["llmd"]["scorers"] == {
        "queue-scorer": 2,
        "kv-cache-utilization-scorer": 2,
        "prefix-cache-scorer": 3,
    }
    assert status["replicas"]["desired"] == 2


def test_without_a_host_the_model_answers_under_its_path_of_the_gateway() -> None:
    out = run(claim())
    (route,) = of_kind(out, "HTTPRoute")
    rule = route["spec"]["rules"][0]
    assert "hostnames" not in route["spec"]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": f"/{NS}/qwen"}}]
    assert rule["filters"][0]["urlRewrite"]["path"]["replacePrefixMatch"] == "/"
    assert out.status["endpoint"] == f"{CLUSTER['status']['llmd']['endpoint']}/{NS}/qwen"
    assert out.status["llmd"]["path"] == f"/{NS}/qwen"


@pytest.mark.parametrize("profile", llmd_profiles.profiles())
@pytest.mark.parametrize("disaggregated", [False, True])
def test_every_profile_is_a_configuration_the_picker_accepts(
    profile: str, disaggregated: bool
) -> None:
    config = epp.epp_config(profile, disaggregated)
    assert epp.config_problems(config) == []
    assert config["apiVersion"] == "llm-d.ai/v1alpha1" and config["kind"] == "EndpointPickerConfig"
    scorers = llmd_profiles.data()["profiles"][profile]["scorers"]
    for p in config["schedulingProfiles"]:
        weights = {r["pluginRef"]: r["weight"] for r in p["plugins"] if "weight" in r}
        assert weights == scorers, p["name"]
    names = [p["name"] for p in config["schedulingProfiles"]]
    if disaggregated:
        assert names == ["prefill", "decode"]
        types = [p["type"] for p in config["plugins"]]
        assert {"prefill-filter", "decode-filter", "disagg-profile-handler"} <= set(types)
        assert "prefix-based-pd-decider" in types and "approx-prefix-cache-producer" in types
    else:
        assert names == ["default"]


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"plugins": [{"type": "random-scorer"}]}, "'random-scorer' is not registered"),
        (
            {
                "plugins": [{"type": "queue-scorer"}],
                "schedulingProfiles": [{"name": "d", "plugins": [{"pluginRef": "x"}]}],
            },
            "undeclared plugin 'x'",
        ),
        ({"plugins": [], "schedulingProfiles": [{"name": "d", "plugins": []}]}, "has no plugins"),
        (
            {
                "plugins": [
                    {"type": "disagg-profile-handler", "parameters": {"deciders": {"prefill": "y"}}}
                ]
            },
            "undeclared decider 'y'",
        ),
    ],
)
def test_the_configuration_check_catches_what_the_picker_refuses(
    config: dict, problem: str
) -> None:
    assert any(problem in p for p in epp.config_problems(config)), epp.config_problems(config)


def test_the_picker_configuration_is_the_claims_profile_and_restarts_it() -> None:
    a = run(claim(llmd={"profile": "load"}))
    b = run(claim(llmd={"profile": "prefixAffinity"}))
    cfg = [yaml_config(o) for o in (a, b)]
    assert [p["type"] for p in cfg[0]["plugins"]] == [
        "queue-scorer",
        "kv-cache-utilization-scorer",
        "max-score-picker",
    ]
    assert "prefix-cache-scorer" in [p["type"] for p in cfg[1]["plugins"]]
    digest = [
        next(iter(of_kind(o, "Deployment")))["spec"]["template"]["metadata"]["annotations"]
        for o in (a, b)
    ]
    assert digest[0] != digest[1], "a new configuration rolls the picker"
    assert a.status["llmd"]["profile"] == "load"


def yaml_config(out: Outcome) -> dict[str, Any]:

    (cm,) = of_kind(out, "ConfigMap")
    return parse_yaml(cm["data"][epp.EPP_CONFIG_FILE])


def test_switching_backend_is_one_field() -> None:
    """The same claim on the production stack and on llm-d: the same plan; keys apart, so
    Crossplane deletes the one backend's objects when the other's appear."""
    both = cluster(apps__vllm=True, vllm={"namespace": NS})
    stack_claim = claim(ingressHost="qwen.example.com")
    del stack_claim["spec"]["parameters"]["backend"]
    stack = run(stack_claim, both)
    llm_d = run(claim(ingressHost="qwen.example.com"), both)
    assert stack.fatal is None and llm_d.fatal is None, (stack.fatal, llm_d.fatal)
    for field in ("gpus", "tensorParallelSize", "maxModelLen", "kvCacheGiB", "weightsGiB"):
        assert stack.status["plan"][field] == llm_d.status["plan"][field], field
    assert stack.status["plan"]["backend"] == "productionStack"
    assert any(k.startswith(RUNTIME) for k in stack.resources)
    assert any(k.startswith(LLMD_ENGINE) for k in llm_d.resources)
    shared = set(stack.resources) & set(llm_d.resources)
    assert shared <= {"usage-inference-cluster"}, shared
    # The same vLLM settings: the operator writes the tensor parallel size only above one.
    flags = [
        {engine_args.flag_name(a) for a in o.status["plan"]["engineArgs"] if a.startswith("--")}
        for o in (stack, llm_d)
    ]
    assert flags[0] <= flags[1] and flags[1] - flags[0] <= {"--tensor-parallel-size"}


def test_a_disaggregated_model_prefills_apart_and_hands_over_by_nixl() -> None:
    out = run(claim(disaggregation={"prefill": {"replicas": 2, "gpu": 1}, "decode": {"gpu": 2}}))
    assert out.fatal is None, out.fatal
    valid(out)
    prefill, decode = engine(out, "prefill"), engine(out, "decode")
    assert prefill["spec"]["replicas"] == 2 and decode["spec"]["replicas"] == 1
    p_pod, d_pod = (s["spec"]["template"]["spec"] for s in (prefill, decode))
    p_vllm, d_vllm = p_pod["containers"][0], d_pod["containers"][0]

    def flag(args: list[str], name: str) -> str:
        return args[args.index(name) + 1]

    assert json.loads(flag(p_vllm["args"], "--kv-transfer-config")) == {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_producer",
    }
    assert (
        json.loads(flag(d_vllm["args"], "--kv-transfer-config"))["kv_connector"] == "NixlConnector"
    )
    assert flag(p_vllm["args"], "--tensor-parallel-size") == "1"
    assert flag(d_vllm["args"], "--tensor-parallel-size") == "2"
    # Decode: vLLM behind the routing sidecar, which takes the pool's port.
    assert flag(d_vllm["args"], "--port") == "8200" and flag(p_vllm["args"], "--port") == "8000"
    assert d_vllm["readinessProbe"]["httpGet"]["port"] == 8200
    sidecar = d_pod["initContainers"][1]
    assert (
        sidecar["restartPolicy"] == "Always" and sidecar["image"] == llmd_images()["sidecar_image"]
    )
    assert "--port=8000" in sidecar["args"] and "--model-server-port=8200" in sidecar["args"]
    assert "--enable-ssrf-protection=true" in sidecar["args"]
    assert f"--inference-pool={NS}/qwen" in sidecar["args"]
    assert d_pod["serviceAccountName"] == "qwen-llm-d", "the sidecar reads the pool's pods"
    assert p_pod["automountServiceAccountToken"] is False
    # NIXL's side channel on each pod's address; the RDMA device each pod asks for.
    for c in (p_vllm, d_vllm):
        env = {e["name"]: e for e in c["env"]}
        assert (
            env["VLLM_NIXL_SIDE_CHANNEL_HOST"]["valueFrom"]["fieldRef"]["fieldPath"]
            == "status.podIP"
        )
        assert c["resources"]["limits"]["rdma/ib"] == "1"
        assert "IPC_LOCK" in c["securityContext"]["capabilities"]["add"]
        assert vllm_cli.problems(c["args"][1:]) == []
    # The picker's filters select each side by its label.
    assert prefill["spec"]["template"]["metadata"]["labels"][llmd.ROLE_LABEL] == "prefill"
    assert decode["spec"]["template"]["metadata"]["labels"][llmd.ROLE_LABEL] == "decode"
    assert [p["name"] for p in yaml_config(out)["schedulingProfiles"]] == ["prefill", "decode"]
    # Both StatefulSets are distinct (selectors apart), the pool selects both.
    sel = [s["spec"]["selector"]["matchLabels"] for s in (prefill, decode)]
    assert sel[0] != sel[1]
    pool = of_kind(out, "InferencePool")[0]["spec"]["selector"]["matchLabels"]
    assert pool.items() <= sel[0].items() and pool.items() <= sel[1].items()
    pd = out.status["plan"]["disaggregation"]
    assert (pd["gpus"], pd["prefill"]["gpus"], pd["decode"]["gpus"]) == (4, 1, 2)
    assert (
        pd["prefill"]["maxModelLen"]
        == pd["decode"]["maxModelLen"]
        == out.status["plan"]["maxModelLen"]
    )
    assert "rdma/ib" in pd["kvTransfer"]
    assert {c.type: c.status for c in out.conditions}["GPUBudget"] == "True"


# (prefill gpu, decode gpu) given -> (prefill, decode) planned, on 8 x H100
SIDES = [
    ((None, None), (1, 2)),  # decode: twice prefill
    ((4, None), (4, 8)),
    ((8, None), (8, 8)),  # the node's GPUs cap it
    ((None, 4), (1, 4)),
    ((2, 2), (2, 2)),
]


@pytest.mark.parametrize(("given", "planned"), SIDES)
def test_prefill_favours_compute_decode_favours_memory(given, planned) -> None:
    sides = {
        side: ({"gpu": g} if g else {})
        for side, g in zip(("prefill", "decode"), given, strict=True)
    }
    out = run(claim("Qwen/Qwen3-8B", disaggregation=sides))  # 32 heads: 1 to 8 GPUs
    assert out.fatal is None, out.fatal
    pd = out.status["plan"]["disaggregation"]
    assert (pd["prefill"]["gpus"], pd["decode"]["gpus"]) == planned


def test_disaggregated_sides_size_windowed_layers_as_full() -> None:
    """vLLM turns its hybrid KV cache manager off under a KV connector: gpt-oss's windowed
    layers take full-length KV on both sides, so each GPU holds fewer tokens."""
    model = "openai/gpt-oss-20b"
    aggregated = run(claim(model, gpu=1))
    split = run(claim(model, disaggregation={"prefill": {"gpu": 1}, "decode": {"gpu": 1}}))
    assert aggregated.fatal is None and split.fatal is None, (aggregated.fatal, split.fatal)
    a = aggregated.status["plan"]["perGPU"]["kvBytesPerToken"]
    s = split.status["plan"]["perGPU"]["kvBytesPerToken"]
    assert s == 2 * a, (a, s)  # half its layers are windowed


def test_vllm_outlasts_its_clients_keep_alive_and_only_the_sidecar_holds_a_token() -> None:
    """Three things a running P/D pool hits (issue 24): vLLM closing idle connections (5 s)
    that the sidecar and the gateway reuse (90 s) resets requests; the decode pod's token
    belongs to the sidecar, not to vLLM; NIXL's side channel is a declared port."""
    out = run(claim(disaggregation={"prefill": {"replicas": 2, "gpu": 1}, "decode": {"gpu": 2}}))
    assert out.fatal is None, out.fatal
    valid(out)
    for role in ("prefill", "decode"):
        pod = engine(out, role)["spec"]["template"]["spec"]
        vllm = pod["containers"][0]
        env = {e["name"]: e.get("value") for e in vllm["env"]}
        assert int(env["VLLM_HTTP_TIMEOUT_KEEP_ALIVE"]) > 90, role
        assert env["VLLM_NIXL_SIDE_CHANNEL_PORT"] == "5600"
        assert {"name": "nixl", "containerPort": 5600, "protocol": "TCP"} in vllm["ports"]
        assert pod["automountServiceAccountToken"] is False, f"{role}: no token for vLLM"
        assert not any(
            m["mountPath"].startswith("/var/run/secrets") for m in vllm["volumeMounts"]
        ), role
    d_pod = engine(out, "decode")["spec"]["template"]["spec"]
    sidecar = d_pod["initContainers"][1]
    token = {"name": "sidecar-token", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
    assert {**token, "readOnly": True} in sidecar["volumeMounts"]
    volume = next(v for v in d_pod["volumes"] if v["name"] == "sidecar-token")
    sources = volume["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    aggregated = run(claim())
    a_env = engine(aggregated, "prefill-decode")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "120"} in a_env, "the gateway's pool"
    short = run(claim(engine={"env": [{"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "5"}]}))
    assert short.fatal is not None
    assert short.fatal.startswith(
        "spec.parameters.engine.env[0].value: VLLM_HTTP_TIMEOUT_KEEP_ALIVE '5' would close"
    )
    longer = run(claim(engine={"env": [{"name": "VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "value": "300"}]}))
    assert longer.fatal is None, longer.fatal
    l_env = engine(longer, "prefill-decode")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e["value"] for e in l_env if e["name"] == "VLLM_HTTP_TIMEOUT_KEEP_ALIVE"] == ["300"]


def pd(prefill: dict | None = None, decode: dict | None = None) -> dict:
    return {"disaggregation": {"prefill": prefill or {}, "decode": decode or {}}}


NEXT_MAMBA = hub_server.hub_model(hub_server.recorded_models()["Qwen/Qwen3-Next-80B-A3B-Instruct"])

# (case, claim, cluster, field, what the refusal says)
REFUSALS: list[tuple[str, dict, dict | None, str, str]] = [
    (
        "llm-d on a cluster without it",
        claim(),
        cluster(apps__llmd=False, llmd=None),
        "spec.parameters.backend",
        "set spec.parameters.apps.llmd.enabled: true on InferenceCluster a-team/inference-llmd",
    ),
    (
        "llm-d without a cluster",
        {
            **claim(),
            "spec": {
                "parameters": {
                    "model": "Qwen/Qwen2.5-7B-Instruct",
                    "backend": "llmd",
                    "providerConfigName": "pc",
                }
            },
        },
        None,
        "spec.parameters.backend",
        "name one with apps.llmd in spec.parameters.clusterRef",
    ),
    (
        "disaggregation on the production stack",
        {
            **claim(),
            "spec": {
                "parameters": {
                    "model": "Qwen/Qwen2.5-7B-Instruct",
                    "clusterRef": {"name": "inference-llmd"},
                    **pd(),
                }
            },
        },
        None,
        "spec.parameters.disaggregation",
        "set spec.parameters.backend: llmd",
    ),
    (
        "disaggregation without an RDMA network",
        claim(**pd()),
        cluster(gpu__rdma=None),
        "spec.parameters.disaggregation",
        "set spec.parameters.gpu.rdma.enabled: true on InferenceCluster a-team/inference-llmd",
    ),
    (
        "an embedding model has no decode",
        claim("BAAI/bge-m3", **pd()),
        None,
        "spec.parameters.disaggregation",
        "is a embed model",
    ),
    (
        "replicated KV heads to a narrower decode side",
        claim("Qwen/Qwen2.5-1.5B-Instruct", **pd({"gpu": 4}, {"gpu": 2})),
        None,
        "spec.parameters.disaggregation.prefill.gpu",
        "holds one of Qwen/Qwen2.5-1.5B-Instruct's 2 KV heads per GPU or fewer (replicated)",
    ),
    (
        "one KV head per prefill GPU to a narrower decode side",
        claim("Qwen/Qwen2.5-7B-Instruct", **pd({"gpu": 4}, {"gpu": 2})),
        None,
        "spec.parameters.disaggregation.prefill.gpu",
        "NIXL cannot send a replicated cache to a narrower decode side (2 GPUs)",
    ),
    (
        "a wider decode side replicating heads prefill splits",
        claim("Qwen/Qwen3-30B-A3B", **pd({"gpu": 1}, {"gpu": 8})),
        None,
        "spec.parameters.disaggregation.decode.gpu",
        "decode on 8 GPUs replicates Qwen/Qwen3-30B-A3B's 4 KV heads while prefill on 1 splits",
    ),
    (
        "the hybrid KV cache manager forced on",
        claim(engine={"extraArgs": ["--no-disable-hybrid-kv-cache-manager"]}, **pd()),
        None,
        "spec.parameters.engine.extraArgs",
        "its NIXL connector does not support the hybrid KV cache manager",
    ),
    (
        "a host the Gateway answers to",
        claim(ingressHost="inference-gateway.agentgateway-system.svc.cluster.local"),
        None,
        "spec.parameters.ingressHost",
        "a route for it would take their requests",
    ),
    (
        "the Gateway's short name",
        claim(ingressHost="inference-gateway.agentgateway-system"),
        None,
        "spec.parameters.ingressHost",
        "is a name inside the cluster",
    ),
    (
        "tensor parallel sizes neither of which divides the other",
        claim("Qwen/Qwen2.5-1.5B-Instruct", **pd({"gpu": 4}, {"gpu": 6})),
        None,
        "spec.parameters.disaggregation.decode.gpu",
        "only when one is a multiple of the other",
    ),
    (
        "more GPUs than the pool has free",
        claim(**pd({"replicas": 16, "gpu": 1}, {"gpu": 2})),
        None,
        "spec.parameters.disaggregation",
        "16 prefill x 1 + 1 decode x 2 = 18 GPUs do not fit",
    ),
    (
        "a side wider than a node",
        claim(**pd({"gpu": 16})),
        None,
        "spec.parameters.disaggregation.prefill.gpu",
        "one node: disaggregated pods do not span nodes",
    ),
    (
        "a side whose GPUs split no heads",
        claim(**pd(None, {"gpu": 3})),
        None,
        "spec.parameters.disaggregation.decode.gpu",
        "spec.parameters.disaggregation.decode.gpu: 3",
    ),
    (
        "gpu beside disaggregation",
        claim(gpu=2, **pd()),
        None,
        "spec.parameters.gpu",
        "are exclusive",
    ),
    (
        "replicas beside disaggregation",
        claim(replicas=2, **pd()),
        None,
        "spec.parameters.replicas",
        "are exclusive",
    ),
    (
        "autoscaling beside disaggregation",
        claim(autoscaling={"maxReplicas": 2}, **pd()),
        None,
        "spec.parameters.autoscaling",
        "are exclusive",
    ),
    (
        "simulated disaggregation",
        claim(engine={"simulate": True}, **pd()),
        None,
        "spec.parameters.engine.simulate",
        "the simulator moves no KV cache",
    ),
    (
        "a KV connector of the claim's own",
        claim(
            engine={"extraArgs": ["--kv-transfer-config", '{"kv_connector":"NixlConnector"}']},
            **pd(),
        ),
        None,
        "spec.parameters.engine.extraArgs",
        "--kv-transfer-config is spec.parameters.disaggregation's",
    ),
    (
        "the same, abbreviated",
        claim(engine={"extraArgs": ["--kv-transfer-c={}"]}, **pd()),
        None,
        "spec.parameters.engine.extraArgs",
        "--kv-transfer-config is spec.parameters.disaggregation's",
    ),
    (
        "NIXL's side channel redirected",
        claim(
            engine={"env": [{"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "10.0.0.1"}]}, **pd()
        ),
        None,
        "spec.parameters.engine.env",
        "VLLM_NIXL_SIDE_CHANNEL_HOST is spec.parameters.disaggregation's",
    ),
    (
        "an unknown profile",
        claim(llmd={"profile": "fastest"}),
        None,
        "spec.parameters.llmd.profile",
        "use one of balanced, ",
    ),
    (
        "llm-d settings on the production stack",
        {
            **claim(),
            "spec": {
                "parameters": {
                    "model": "Qwen/Qwen2.5-7B-Instruct",
                    "clusterRef": {"name": "inference-llmd"},
                    "llmd": {"profile": "load"},
                }
            },
        },
        None,
        "spec.parameters.llmd",
        "applies only with spec.parameters.backend: llmd",
    ),
    (
        "an unknown backend",
        claim(backend="vllm"),
        None,
        "spec.parameters.backend",
        "use one of productionStack, llmd",
    ),
    (
        "a model larger than a node",
        claim("moonshotai/Kimi-K2-Instruct"),
        cluster(apps__lws=True),
        "spec.parameters.model",
        "more than a node offers",
    ),
    (
        "a system namespace",
        claim(targetNamespace="agentgateway-system"),
        None,
        "spec.parameters.targetNamespace",
        "agentgateway-system",
    ),
]


@pytest.mark.parametrize(
    ("case", "xr", "state", "field", "says"), REFUSALS, ids=[r[0] for r in REFUSALS]
)
def test_refusals_name_the_field_and_what_would_work(case, xr, state, field, says) -> None:
    out = run(xr, state)
    assert out.fatal is not None, f"{case}: not refused"
    assert out.fatal.startswith(field), out.fatal
    assert says in out.fatal, out.fatal
    assert not [k for k in out.resources if k.startswith((LLMD_ENGINE, LLMD_POOL, LLMD_ROUTE))]


def test_a_model_with_mamba_state_is_not_disaggregated() -> None:
    xr = claim("Qwen/Qwen3-Next-80B-A3B-Instruct", **pd())
    out = run(xr, hub=HubAnswer(status="found", model=NEXT_MAMBA))
    assert out.fatal is not None and out.fatal.startswith("spec.parameters.disaggregation: ")
    assert "mamba" in out.fatal and "serve it aggregated" in out.fatal


def test_the_other_models_count_every_prefill_and_decode_gpu() -> None:
    """The disaggregated example holds 2 x 1 + 1 x 4 GPUs: a model created after it sees
    them held (from its status, or from its claim before it has one)."""
    split = load_yaml(EXAMPLES / "llm-disaggregated.yaml")[0]
    split["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    first = run(split, peers=[PEER])
    assert first.fatal is None, first.fatal
    published = {**split, "status": first.status}
    late = claim(name="late", replicas=1)
    late["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    for peer in (published, split):
        out = run(late, peers=[PEER, peer])
        budget = next(c for c in out.conditions if c.type == "GPUBudget").message
        assert "gpt-oss-120b 6" in budget, budget


# (case, the earlier model's disaggregation with no status yet, GPUs counted for it)
UNPUBLISHED = [
    (
        "both sides given",
        {"prefill": {"replicas": 2, "gpu": 1}, "decode": {"replicas": 1, "gpu": 4}},
        6,
    ),
    # gpt-oss-120b: prefill on 1 H100 (the fewest that hold it), decode twice that.
    ("decode chosen", {"prefill": {"replicas": 2, "gpu": 1}, "decode": {"replicas": 1}}, 4),
    ("both chosen", {"prefill": {"replicas": 1}, "decode": {"replicas": 3}}, 7),
    (
        "refused: it runs nothing",
        {"prefill": {"replicas": 1, "gpu": 3}, "decode": {"replicas": 1}},
        0,
    ),
]


@pytest.mark.parametrize("sides,held", [pytest.param(*c[1:], id=c[0]) for c in UNPUBLISHED])
def test_an_earlier_model_without_a_plan_counts_the_gpus_its_function_will_choose(
    sides: dict, held: int
) -> None:
    split = load_yaml(EXAMPLES / "llm-disaggregated.yaml")[0]
    split["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    split["spec"]["parameters"]["disaggregation"] = sides
    late = claim(name="late", replicas=1)
    late["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    out = run(late, peers=[PEER, split])
    budget = next(c for c in out.conditions if c.type == "GPUBudget").message
    if held:
        assert f"gpt-oss-120b {held}" in budget, budget
    else:
        assert "gpt-oss-120b" not in budget, budget


def test_a_simulated_llmd_model_is_the_simulator_behind_the_pool() -> None:
    out = run(claim(engine={"simulate": True}, replicas=2))
    assert out.fatal is None, out.fatal
    valid(out)
    assert not of_kind(out, "StatefulSet")
    sim = manifests(out)[SIMULATOR]
    assert sim["spec"]["template"]["spec"]["containers"][0]["image"] == simulator_image()
    pool = of_kind(out, "InferencePool")[0]["spec"]["selector"]["matchLabels"]
    assert pool.items() <= sim["spec"]["template"]["metadata"]["labels"].items()
    assert sim["spec"]["replicas"] == 2
    assert out.status["plan"]["simulated"] is True
    assert LLMD_PICKER in manifests(out)


def test_an_autoscaled_llmd_model_scales_its_statefulset() -> None:
    keda = cluster(apps__keda=True, keda={"release": "inference-llmd-app-keda"})
    out = run(claim(autoscaling={"minReplicas": 1, "maxReplicas": 3}), keda)
    assert out.fatal is None, out.fatal
    valid(out)
    scaler = manifests(out)[SCALER]
    sts = engine(out, "prefill-decode")
    assert scaler["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": sts["metadata"]["name"],
    }
    assert "replicas" not in sts["spec"], "KEDA owns the count"
    url = scaler["spec"]["triggers"][0]["metadata"]["url"]
    assert url.startswith(f"http://qwen-engines.{NS}.svc.cluster.local:8000/")


def test_a_new_cache_size_replaces_the_statefulset() -> None:
    small = run(claim(storage={"size": "60Gi"}))
    large = run(claim(storage={"size": "120Gi"}))
    names = [engine(o, "prefill-decode")["metadata"]["name"] for o in (small, large)]
    assert names[0] != names[1]
    assert all(len(n) <= 52 for n in names), "pod and revision labels stay within 63"


def test_sizing_is_the_production_stacks() -> None:
    """The aggregated plan is sizing.plan's for the cluster's GPU on one node."""
    out = run(claim("Qwen/Qwen3-32B"))
    from function.limits import GPU_TYPES, GpuShape
    from function.model.catalog_lookup import lookup

    plan = sizing.plan(
        lookup("Qwen/Qwen3-32B"), None, GpuShape(GPU_TYPES["h100"].memory_gib, 8, "h100", False)
    )
    assert out.status["plan"]["gpus"] == plan.gpus
    assert out.status["plan"]["maxModelLen"] == plan.max_model_len


def test_the_plugin_names_are_those_of_the_pinned_router() -> None:
    """function/backends/llmd.yaml was read from the llm-d-router release kcl/versions.k pins, whose
    images the Composition passes."""
    import re

    from conftest import ROOT

    versions = (ROOT / "kcl" / "versions.k").read_text()
    pin = re.search(r'^llm_d_router = "([^"]+)"', versions, re.MULTILINE)
    assert pin and llmd_profiles.data()["router"] == pin.group(1)
    images = llmd_images()
    assert images["picker_image"].endswith(f":{pin.group(1)}")
    assert images["sidecar_image"].endswith(f":{pin.group(1)}")
    vllm = re.search(r'^vllm_version = "([^"]+)"', versions, re.MULTILINE)
    assert vllm and images["llmd_engine_image"].endswith(f":v{vllm.group(1)}")


# (model, prefill GPUs, decode GPUs) NIXL moves the cache between (vLLM 0.17.1)
TRANSFERABLE = [
    ("Qwen/Qwen3-30B-A3B", 1, 2),  # 4 KV heads: both split them
    ("Qwen/Qwen3-30B-A3B", 4, 8),  # both replicate
    ("Qwen/Qwen3-30B-A3B", 2, 1),  # a wider prefill that still splits them
    ("Qwen/Qwen3-30B-A3B", 1, 4),  # decode at one head per GPU, not beyond
    ("deepseek-ai/DeepSeek-V3", 8, 2),  # MLA: a latent vector, any ratio
    ("deepseek-ai/DeepSeek-V3", 1, 8),
]


@pytest.mark.parametrize(("model", "p", "d"), TRANSFERABLE)
def test_shapes_nixl_moves_are_accepted(model: str, p: int, d: int) -> None:
    from function.claim.spec import parse
    from function.model.catalog_lookup import lookup
    from function.plan.disaggregation import kv_transfer_problem as _kv_transfer_problem

    spec = parse(claim(model, **pd()))
    assert _kv_transfer_problem(spec, lookup(model), p, d) is None


def test_the_default_decode_side_is_one_nixl_accepts() -> None:
    """Twice prefill, unless NIXL could not pair them: then as wide as prefill."""
    out = run(claim("Qwen/Qwen3-30B-A3B", **pd({"gpu": 4})))  # 8 would replicate 4 heads
    assert out.fatal is None, out.fatal
    assert out.status["plan"]["disaggregation"]["decode"]["gpus"] == 8  # both replicate
    out = run(claim("Qwen/Qwen3-30B-A3B", **pd({"gpu": 2})))
    assert out.status["plan"]["disaggregation"]["decode"]["gpus"] == 4


def test_a_host_belongs_to_the_model_that_asked_first() -> None:
    first = claim(name="first", ingressHost="chat.example.com")
    first["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    second = claim(name="second", ingressHost="chat.example.com")
    second["metadata"]["creationTimestamp"] = "2026-02-01T00:00:00Z"
    assert run(first, peers=[second]).fatal is None
    out = run(second, peers=[first])
    assert out.fatal == (
        "spec.parameters.ingressHost: chat.example.com is already the host of LLMInference "
        "a-team/first on InferenceCluster inference-llmd, created before this one; choose "
        "another host"
    )


def test_claims_whose_names_share_a_prefix_get_their_own_statefulsets() -> None:
    long = "qwen-production-assistant-for-team-a"
    names = [
        engine(run(claim(name=f"{long}{suffix}")), "prefill-decode")["metadata"]["name"]
        for suffix in ("-blue", "-green")
    ]
    assert names[0] != names[1]


def test_an_aggregated_model_with_its_own_kv_connector_sizes_windows_as_full() -> None:
    """vLLM turns its hybrid KV cache manager off under any --kv-transfer-config the claim
    sets, on either backend."""
    model = "openai/gpt-oss-20b"
    plain = run(claim(model, gpu=1))
    lmcache = run(
        claim(
            model,
            gpu=1,
            engine={
                "extraArgs": [
                    "--kv-transfer-config",
                    '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
                ]
            },
        )
    )
    assert lmcache.fatal is None, lmcache.fatal
    a = plain.status["plan"]["perGPU"]["kvBytesPerToken"]
    b = lmcache.status["plan"]["perGPU"]["kvBytesPerToken"]
    assert b == 2 * a


def test_the_picker_and_the_sidecar_are_hardened() -> None:
    out = run(claim(**pd()))
    picker = next(iter(of_kind(out, "Deployment")))
    args = picker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--enable-pprof=false" in args, "its metrics port is open in the cluster"
    sidecar = engine(out, "decode")["spec"]["template"]["spec"]["initContainers"][1]
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}


def placed_cluster(name: str, per_node: int = 8, max_nodes: int = 2, **status: Any) -> dict:
    """The llm-d cluster of the examples under another name, labelled for a selector."""
    c = cluster(gpu__perNode=per_node, gpu__maxNodes=max_nodes, **status)
    c["metadata"] = {"name": name, "namespace": NS, "labels": {"team": "a"}}
    c["status"]["providerConfigName"] = name
    return c


def place(xr: dict, clusters: list[dict]) -> Outcome:
    params = xr["spec"]["parameters"]
    params.pop("clusterRef")
    params["clusterSelector"] = {"matchLabels": {"team": "a"}}
    return compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            required={PLACEMENT_REQUIREMENT: clusters, PEERS: [xr], "inference-cluster": []},
            **llmd_images(),
        )
    )


def candidates(out: Outcome) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in (out.placement or {}).get("candidates", [])}


GPT_OSS_PD = {"prefill": {"replicas": 2, "gpu": 1}, "decode": {"replicas": 1, "gpu": 4}}

# (case, claim, clusters, chosen, {cluster: what its verdict says, and GPUs it counts})
PLACEMENTS: list[tuple[str, dict, list[dict], str | None, dict[str, tuple[str, int | None]]]] = [
    (
        "a disaggregated model counts every prefill and decode GPU (2 x 1 + 1 x 4)",
        claim("openai/gpt-oss-120b", "gpt", disaggregation=GPT_OSS_PD),
        [placed_cluster("half", per_node=4, max_nodes=1), placed_cluster("whole")],
        "whole",
        {"half": ("needs 6 GPUs (1 x 6), 4 of 4 free", 6), "whole": ("chosen", 6)},
    ),
    (
        "a disaggregated model needs an RDMA network",
        claim("openai/gpt-oss-120b", "gpt", disaggregation=GPT_OSS_PD),
        [placed_cluster("plain", gpu__rdma__enabled=False)],
        None,
        {"plain": ("no RDMA", None)},
    ),
    (
        "on nodes of one GPU the decode side defaults to prefill's width",
        claim(
            "openai/gpt-oss-120b",
            "gpt",
            disaggregation={"prefill": {"replicas": 1, "gpu": 1}, "decode": {"replicas": 1}},
        ),
        [placed_cluster("narrow", per_node=1, max_nodes=8)],
        "narrow",
        {"narrow": ("chosen", 2)},
    ),
    (
        "a side wider than a node fits nowhere",
        claim("openai/gpt-oss-120b", "gpt", disaggregation=GPT_OSS_PD),
        [placed_cluster("pairs", per_node=2, max_nodes=8)],
        None,
        {"pairs": ("spec.parameters.disaggregation.decode.gpu", None)},
    ),
    (
        "an llm-d replica is one pod: no spanning nodes where LeaderWorkerSet runs",
        claim("Qwen/Qwen3-235B-A22B", "qwen3"),
        [placed_cluster("spans", per_node=4, max_nodes=4, apps__lws=True)],
        None,
        {"spans": ("4 x h100 (79.11 GiB) per node", None)},
    ),
    (
        "a prefill side wider than a node says llm-d pods do not span nodes",
        claim(
            "openai/gpt-oss-120b",
            "gpt",
            disaggregation={"prefill": {"replicas": 1, "gpu": 4}, "decode": {"replicas": 1}},
        ),
        [placed_cluster("pairs", per_node=2, max_nodes=8, apps__lws=True)],
        None,
        {"pairs": ("(llm-d serves a replica from one pod)", None)},
    ),
    (
        "an llm-d replica on one node of eight",
        claim("Qwen/Qwen3-235B-A22B", "qwen3"),
        [
            placed_cluster("spans", per_node=4, max_nodes=4, apps__lws=True),
            placed_cluster("wide", per_node=8, max_nodes=1),
        ],
        "wide",
        {"wide": ("chosen", 8)},
    ),
]


@pytest.mark.parametrize(
    "xr,clusters,expected,verdicts",
    [pytest.param(*c[1:], id=c[0]) for c in PLACEMENTS],
)
def test_placement_sizes_llmd_models_as_they_will_run(
    xr: dict, clusters: list[dict], expected: str | None, verdicts: dict
) -> None:
    out = place(copy.deepcopy(xr), clusters)
    assert (out.placement or {}).get("cluster") == expected, out.placement
    found = candidates(out)
    for name, (says, gpus) in verdicts.items():
        assert says in found[name]["reason"], found[name]
        assert found[name].get("gpusPerReplica") == gpus, found[name]
    if expected:
        assert out.fatal is None, out.fatal


def test_a_model_no_node_holds_is_pointed_at_the_production_stack() -> None:
    """llm-d pods never span nodes: the refusal says which backend does, not that the
    cluster's LeaderWorkerSet would help."""
    out = run(claim("moonshotai/Kimi-K2-Instruct", "kimi"), cluster(apps__lws=True))
    assert out.fatal and out.fatal.startswith("spec.parameters.model: "), out.fatal
    assert "llm-d serves a replica from one pod: use the productionStack backend" in out.fatal
    out = run(claim("Qwen/Qwen3-235B-A22B", "qwen3", gpu=8), cluster(gpu__perNode=4))
    assert out.fatal and "(llm-d serves a replica from one pod)" in out.fatal, out.fatal
    assert "apps.lws spans" not in out.fatal


def test_on_a_shared_class_every_role_reads_one_claim_downloaded_once() -> None:
    """Issue 24: each llm-d pod downloaded the model into a claim of its own. With a
    ReadWriteMany class on the cluster, prefill and decode pods share one claim, filled once
    by a Job before any of them starts."""
    state = cluster(storage__shared={"className": "cephfs", "readMiBps": 800})
    xr = claim(disaggregation={"prefill": {"replicas": 2, "gpu": 1}, "decode": {"gpu": 2}})
    first = run(xr, state)
    assert first.fatal is None, first.fatal
    valid(first)
    pvcs = of_kind(first, "PersistentVolumeClaim")
    assert [(p["metadata"]["name"], p["spec"]["accessModes"]) for p in pvcs] == [
        ("qwen-cache", ["ReadWriteMany"])
    ]
    assert pvcs[0]["spec"]["storageClassName"] == "cephfs"
    for role in ("prefill", "decode"):
        sts = engine(first, role)
        assert sts["spec"]["replicas"] == 0, f"{role}: no pod before the weights are cached"
        assert "volumeClaimTemplates" not in sts["spec"]
        volumes = sts["spec"]["template"]["spec"]["volumes"]
        assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "qwen-cache"}} in (
            volumes
        )
    cache = first.status["plan"]["cache"]
    assert (cache["layout"], cache["claims"], cache["downloads"], cache["loadMiBps"]) == (
        "shared",
        1,
        1,
        800,
    )
    (job,) = of_kind(first, "Job")
    key = next(k for k in first.resources if k.startswith("model-fetch"))
    done = run(xr, state, observed={key: ready_object({**job, "status": {"succeeded": 1}})})
    assert engine(done, "prefill")["spec"]["replicas"] == 2
    assert engine(done, "decode")["spec"]["replicas"] == 1
