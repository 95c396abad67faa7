"""The function side of monitoring: what it reads of the cluster's (status.apps.monitoring,
status.monitoring), KEDA's prometheus triggers and latency targets, and each model's Grafana
dashboard. Every object composed here is validated against the pinned CRDs (KEDA v2.20.2)
and the core schemas; every refusal names its field."""

from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    PACKAGE,
    engine_image,
    load_yaml,
    on_cluster,
    simulator_image,
)

from dot_inference.apiserver import validate_objects
from function.claim.serving import parse_latency
from function.claim.spec import SpecError
from function.cluster.target import Monitoring, monitoring_of
from function.compose import compose
from function.keys import FETCH
from function.monitoring import dashboard as dash
from function.monitoring import names, queries
from function.outcome import Inputs, Outcome
from function.policy import ownership

PROMETHEUS = "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090"
GRAFANA = "http://kube-prometheus-stack-grafana.monitoring.svc.cluster.local"
MONITORING = {
    "prometheus": PROMETHEUS,
    "dashboardLabel": {"grafana_dashboard": "1"},
    "grafana": GRAFANA,
}
AWS = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]
LOCAL = load_yaml(EXAMPLES / "state" / "llm-simulated.yaml")[0]
LLMD = load_yaml(EXAMPLES / "state" / "llm-llmd.yaml")[0]


def monitored(cluster: dict[str, Any], on: bool = True, **status: Any) -> dict[str, Any]:
    """`cluster` with its monitoring published as the contract says (docs/inferencecluster.md)."""
    c = copy.deepcopy(cluster)
    c["status"]["apps"]["monitoring"] = on
    c["status"]["apps"]["keda"] = True
    if on:
        c["status"]["monitoring"] = copy.deepcopy(MONITORING) | status
    return c


def claim(cluster: str = "inference-aws", **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "m", "namespace": "a-team"},
        "spec": {
            "parameters": {
                "model": "Qwen/Qwen2.5-1.5B-Instruct",
                "clusterRef": {"name": cluster},
                **params,
            }
        },
    }


def run(xr: dict[str, Any], cluster: dict[str, Any], observed: dict | None = None) -> Outcome:
    return on_cluster(xr, cluster, observed)


def fetched(out: Outcome) -> dict[str, Any]:
    done = {"status": {"atProvider": {"manifest": {"status": {"succeeded": 1}}}}}
    return {k: done for k in out.resources if k.startswith(FETCH)}


def manifests(out: Outcome) -> list[dict[str, Any]]:
    """What the model composes on its cluster (inside provider-kubernetes Objects)."""
    return [
        r["spec"]["forProvider"]["manifest"]
        for r in out.resources.values()
        if r["kind"] == "Object"
    ]


def one(out: Outcome, kind: str) -> dict[str, Any]:
    (found,) = [m for m in manifests(out) if m.get("kind") == kind]
    return found


def valid(out: Outcome) -> None:
    report = validate_objects(list(out.resources.values()))
    assert report.ok, report.summary()


def dashboards(out: Outcome) -> list[dict[str, Any]]:
    """The ConfigMaps Grafana's sidecar loads (by the cluster's label)."""
    return [
        m
        for m in manifests(out)
        if m.get("kind") == "ConfigMap" and "grafana_dashboard" in m["metadata"].get("labels", {})
    ]


def board(out: Outcome) -> dict[str, Any]:
    (config_map,) = dashboards(out)
    (text,) = config_map["data"].values()
    return json.loads(text)


def exprs(d: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in d["panels"] for t in p["targets"]]


# ------------------------------------------------------------------- the contract, read


READ = [
    ("monitoring off", {"apps": {"monitoring": False}, "monitoring": MONITORING}, None),
    ("apps.monitoring missing", {"apps": {}, "monitoring": MONITORING}, None),
    ("apps.monitoring a string", {"apps": {"monitoring": "true"}, "monitoring": MONITORING}, None),
    ("not published yet", {"apps": {"monitoring": True}}, None),
    (
        "no dashboard label",
        {"apps": {"monitoring": True}, "monitoring": {"prometheus": PROMETHEUS}},
        None,
    ),
    (
        "a URL that closes a string",
        {"apps": {"monitoring": True}, "monitoring": MONITORING | {"prometheus": 'http://p"}'}},
        None,
    ),
    (
        "a URL of another scheme",
        {"apps": {"monitoring": True}, "monitoring": MONITORING | {"prometheus": "file:///etc"}},
        None,
    ),
    (
        "a label value no label takes",
        {
            "apps": {"monitoring": True},
            "monitoring": MONITORING | {"dashboardLabel": {"grafana_dashboard": "a b"}},
        },
        None,
    ),
    (
        "a label value that is a number",
        {
            "apps": {"monitoring": True},
            "monitoring": MONITORING | {"dashboardLabel": {"grafana_dashboard": 1}},
        },
        None,
    ),
    (
        "published",
        {"apps": {"monitoring": True}, "monitoring": MONITORING},
        Monitoring(PROMETHEUS, (("grafana_dashboard", "1"),), GRAFANA),
    ),
    (
        "published without Grafana's URL",
        {
            "apps": {"monitoring": True},
            "monitoring": {k: v for k, v in MONITORING.items() if k != "grafana"},
        },
        Monitoring(PROMETHEUS, (("grafana_dashboard", "1"),), None),
    ),
]


@pytest.mark.parametrize(("status", "expected"), [c[1:] for c in READ], ids=[c[0] for c in READ])
def test_what_the_function_reads_of_the_clusters_monitoring(status: dict, expected: Any) -> None:
    assert monitoring_of(status) == expected


HOSTILE_NAMES = ['a"}', "a\\", "A", "a b", "", 'a,model=~".*"', "-a", "a" * 64, "a\n"]


@pytest.mark.parametrize("value", HOSTILE_NAMES)
def test_no_name_that_is_not_a_dns_label_reaches_promql(value: str) -> None:
    with pytest.raises(SpecError) as e:
        names.selector(value, "m")
    assert e.value.field == "spec.parameters.targetNamespace"
    with pytest.raises(SpecError) as e:
        names.selector("a-team", value)
    assert e.value.field == "metadata.name"


def test_a_router_namespace_no_query_can_select_is_refused_not_a_traceback() -> None:
    """The model's namespace defaults to the cluster's router namespace (its status), which
    no schema checked."""
    cluster = monitored(AWS)
    cluster["status"]["vllm"]["namespace"] = 'a"} or vector(1) or {a="'
    cluster["status"]["tenancy"]["allowedNamespaces"].append(cluster["status"]["vllm"]["namespace"])
    out = run(claim(autoscaling={"maxReplicas": 2}), cluster)
    assert out.fatal is not None
    assert "spec.parameters.targetNamespace: the model's namespace" in out.fatal
    assert "is not a DNS label" in out.fatal
    assert not out.resources


def test_the_dashboard_takes_over_nothing() -> None:
    """Like every object on the cluster, the dashboard's Object only observes until the
    provider has shown no ConfigMap of that name exists there, or that it is this claim's."""
    out = run(claim(), monitored(AWS))
    (key,) = [k for k in out.resources if k.startswith(dash.DASHBOARD + "-")]
    assert out.resources[key]["spec"]["managementPolicies"] == list(ownership.PROBE_POLICIES)


# ------------------------------------------------------------------- latency targets


LATENCY_REFUSED = [
    ("not an object", "p90<1s", "autoscaling.latency"),
    ("no metric", {"seconds": 1}, "autoscaling.latency.metric"),
    ("an unknown metric", {"metric": "e2e", "seconds": 1}, "autoscaling.latency.metric"),
    (
        "PromQL as a metric",
        {"metric": 'vllm:x{a="b"}', "seconds": 1},
        "autoscaling.latency.metric",
    ),
    (
        "a percentile not offered",
        {"metric": "timeToFirstToken", "percentile": 95, "seconds": 1},
        "autoscaling.latency.percentile",
    ),
    (
        "a percentile as a fraction",
        {"metric": "timeToFirstToken", "percentile": 0.9, "seconds": 1},
        "autoscaling.latency.percentile",
    ),
    ("no seconds", {"metric": "timeToFirstToken"}, "autoscaling.latency.seconds"),
    ("zero seconds", {"metric": "timeToFirstToken", "seconds": 0}, "autoscaling.latency.seconds"),
    (
        "negative seconds",
        {"metric": "interTokenLatency", "seconds": -1},
        "autoscaling.latency.seconds",
    ),
    ("seconds as text", {"metric": "timeToFirstToken", "seconds": "1"}, "latency.seconds"),
    ("seconds as a bool", {"metric": "timeToFirstToken", "seconds": True}, "latency.seconds"),
    ("seconds NaN", {"metric": "timeToFirstToken", "seconds": math.nan}, "latency.seconds"),
    ("seconds infinite", {"metric": "timeToFirstToken", "seconds": math.inf}, "latency.seconds"),
    ("above ten minutes", {"metric": "timeToFirstToken", "seconds": 601}, "latency.seconds"),
]


@pytest.mark.parametrize(
    ("value", "field"), [c[1:] for c in LATENCY_REFUSED], ids=[c[0] for c in LATENCY_REFUSED]
)
def test_latency_targets_refused(value: Any, field: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_latency(value, "spec.parameters.autoscaling.latency")
    assert field in e.value.message


def test_a_latency_target_defaults_to_p90() -> None:
    got = parse_latency({"metric": "interTokenLatency", "seconds": 0.05}, "f")
    assert (got.metric, got.percentile, got.seconds) == ("interTokenLatency", 90, 0.05)


def _xrd_errors(latency: Any) -> list[str]:
    obj = claim(autoscaling={"maxReplicas": 2, "latency": latency})
    report = validate_objects([obj], schema_paths=[PACKAGE])
    return [e for _, errs in report.invalid for e in errs]


XRD_CASES = [
    ("p99 TTFT", {"metric": "timeToFirstToken", "percentile": 99, "seconds": 0.5}, None),
    ("ITL default percentile", {"metric": "interTokenLatency", "seconds": 0.05}, None),
    ("unknown metric", {"metric": "queueTime", "seconds": 1}, "metric"),
    ("percentile 95", {"metric": "timeToFirstToken", "percentile": 95, "seconds": 1}, "percentile"),
    ("zero seconds", {"metric": "timeToFirstToken", "seconds": 0}, "seconds"),
    ("seconds as text", {"metric": "timeToFirstToken", "seconds": "1"}, "seconds"),
    ("no seconds", {"metric": "timeToFirstToken"}, "seconds"),
    ("unknown field", {"metric": "timeToFirstToken", "seconds": 1, "query": "up"}, "query"),
]


@pytest.mark.parametrize(
    ("latency", "says"), [c[1:] for c in XRD_CASES], ids=[c[0] for c in XRD_CASES]
)
def test_the_xrd_checks_latency_targets(latency: dict, says: str | None) -> None:
    errs = _xrd_errors(latency)
    if says is None:
        assert errs == []
    else:
        assert any(says in e for e in errs), errs


REFUSED_WITHOUT_MONITORING = [
    ("cluster without monitoring", monitored(AWS, on=False)),
    (
        "monitoring on but not published",
        monitored(AWS) | {"status": {**monitored(AWS)["status"], "monitoring": {}}},
    ),
    ("Prometheus URL that is not one", monitored(AWS, prometheus='http://p"} or vector(9)')),
]


@pytest.mark.parametrize(
    "cluster",
    [c[1] for c in REFUSED_WITHOUT_MONITORING],
    ids=[c[0] for c in REFUSED_WITHOUT_MONITORING],
)
def test_a_latency_target_needs_the_clusters_prometheus(cluster: dict[str, Any]) -> None:
    latency = {"metric": "timeToFirstToken", "percentile": 99, "seconds": 2}
    out = run(claim(autoscaling={"maxReplicas": 2, "latency": latency}), cluster)
    assert out.fatal is not None
    assert "spec.parameters.autoscaling.latency" in out.fatal
    assert "apps.monitoring.enabled: true" in out.fatal
    assert not out.resources


def test_a_latency_target_without_a_cluster_is_refused() -> None:
    xr = claim(
        autoscaling={"maxReplicas": 2, "latency": {"metric": "timeToFirstToken", "seconds": 2}}
    )
    del xr["spec"]["parameters"]["clusterRef"]
    out = compose(Inputs(xr=xr, engine_image=engine_image(), simulator_image=simulator_image()))
    assert out.fatal is not None and "spec.parameters.autoscaling.latency" in out.fatal


# ------------------------------------------------------------------- KEDA's triggers


SEL = 'namespace="a-team",model="m"'
TRIGGERS = [
    (
        "waiting requests",
        {"maxReplicas": 3},
        [("AverageValue", f"sum(vllm:num_requests_waiting{{{SEL}}})", "3")],
    ),
    (
        "KV-cache usage",
        {"maxReplicas": 3, "metric": "kvCacheUsage", "target": 70},
        [("Value", f"avg(vllm:kv_cache_usage_perc{{{SEL}}})", "0.7")],
    ),
    (
        "waiting requests and p99 TTFT",
        {
            "maxReplicas": 3,
            "latency": {"metric": "timeToFirstToken", "percentile": 99, "seconds": 1.5},
        },
        [
            ("AverageValue", f"sum(vllm:num_requests_waiting{{{SEL}}})", "3"),
            (
                "Value",
                "histogram_quantile(0.99, sum by (le) "
                f"(rate(vllm:time_to_first_token_seconds_bucket{{{SEL}}}[2m])))",
                "1.5",
            ),
        ],
    ),
    (
        "p50 ITL",
        {
            "maxReplicas": 3,
            "latency": {"metric": "interTokenLatency", "percentile": 50, "seconds": 0.04},
        },
        [
            ("AverageValue", f"sum(vllm:num_requests_waiting{{{SEL}}})", "3"),
            (
                "Value",
                "histogram_quantile(0.5, sum by (le) "
                f"(rate(vllm:inter_token_latency_seconds_bucket{{{SEL}}}[2m])))",
                "0.04",
            ),
        ],
    ),
]


@pytest.mark.parametrize(
    ("autoscaling", "expected"), [c[1:] for c in TRIGGERS], ids=[c[0] for c in TRIGGERS]
)
def test_keda_reads_prometheus_on_a_cluster_that_has_it(
    autoscaling: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    xr = claim(autoscaling=autoscaling)
    cluster = monitored(AWS)
    out = run(xr, cluster, observed=fetched(run(xr, cluster)))
    assert out.fatal is None, out.fatal
    triggers = one(out, "ScaledObject")["spec"]["triggers"]
    assert [
        (t["type"], t["metricType"], t["metadata"]["query"], t["metadata"]["threshold"])
        for t in triggers
    ] == [("prometheus", kind, query, threshold) for kind, query, threshold in expected]
    assert {t["metadata"]["serverAddress"] for t in triggers} == {PROMETHEUS}
    assert out.status["plan"]["autoscaling"]["metrics"] == "prometheus"
    valid(out)


def test_without_monitoring_keda_reads_the_pods_as_before() -> None:
    xr = claim(autoscaling={"maxReplicas": 3})
    cluster = monitored(AWS, on=False)
    out = run(xr, cluster, observed=fetched(run(xr, cluster)))
    (trigger,) = one(out, "ScaledObject")["spec"]["triggers"]
    assert trigger["type"] == "metrics-api"
    assert out.status["plan"]["autoscaling"]["metrics"] == "metrics-api"
    assert not dashboards(out)
    assert "dashboard" not in out.status["plan"]


# ------------------------------------------------------------------- the dashboard


def test_the_template_uses_only_metrics_vllm_exports_and_the_contracts_labels() -> None:
    template = dash.template()
    assert template["panels"], "a dashboard without panels"
    found = set()
    for expr in exprs(template):
        found |= set(re.findall(r"vllm:[a-z_]+", expr))
        for matcher in re.findall(r"\{([^}]*)\}", expr):
            assert matcher == "__SELECTOR__", expr
        assert not set(re.findall(r"by \(([^)]*)\)", expr)) - {"le", "pod"}, expr
    used = {re.sub(r"_bucket$", "", m) for m in found}
    assert used <= set(queries.METRICS), used - set(queries.METRICS)
    assert set(queries.METRICS) <= used, "a metric the queries offer that no panel shows"


def test_filling_leaves_out_a_line_without_a_value_and_refuses_an_unknown_placeholder() -> None:
    panel = {"targets": [{"expr": "vector(__A__)"}, {"expr": "up"}], "title": "__B__ x"}
    assert dash.fill(panel, {"A": None, "B": None}) == {"targets": [{"expr": "up"}], "title": " x"}
    assert dash.fill(panel, {"A": "1", "B": "t"})["targets"][0] == {"expr": "vector(1)"}
    with pytest.raises(KeyError):
        dash.fill(panel, {"A": "1"})


BACKENDS = [
    ("productionStack", AWS, "inference-aws", {}),
    ("simulator", LOCAL, "inference-local", {"engine": {"simulate": True}}),
    ("llmd", LLMD, "inference-llmd", {"backend": "llmd"}),
    (
        "llmd simulated",
        LLMD,
        "inference-llmd",
        {"backend": "llmd", "engine": {"simulate": True}},
    ),
]


def _engine_pod_names(out: Outcome) -> set[str]:
    """The app.kubernetes.io/name of every engine pod the model composes (the operator gives
    a VLLMRuntime's pods the runtime's labels)."""
    names_ = set()
    for m in manifests(out):
        for labels in (
            m.get("metadata", {}).get("labels", {}) if m.get("kind") == "VLLMRuntime" else {},
            m.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {}),
        ):
            # llm-d's vLLM pods are `llm-d-engine` (function/backends/llmd/objects.py).
            if labels.get("app.kubernetes.io/component") in ("engine", "llm-d-engine"):
                names_.add(labels["app.kubernetes.io/name"])
    return names_


@pytest.mark.parametrize(
    ("cluster", "ref", "params"), [c[1:] for c in BACKENDS], ids=[c[0] for c in BACKENDS]
)
def test_every_backend_gets_a_dashboard_of_its_own_engine_pods(
    cluster: dict[str, Any], ref: str, params: dict[str, Any]
) -> None:
    xr = claim(cluster=ref, **params)
    c = monitored(cluster)
    out = run(xr, c, observed=fetched(run(xr, c)))
    assert out.fatal is None, out.fatal
    (config_map,) = dashboards(out)
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    namespace = config_map["metadata"]["namespace"]
    d = board(out)
    selectors = {m for e in exprs(d) for m in re.findall(r"\{([^}]*)\}", e)}
    (selector,) = selectors
    model = re.fullmatch(r'namespace="([^"]+)",model="([^"]+)"', selector)
    assert model is not None and model.group(1) == namespace
    pods = _engine_pod_names(out)
    assert pods, "no engine pod found to compare with"
    assert pods == {model.group(2)}
    status = out.status["plan"]["dashboard"]
    assert status == {
        "configMap": "m-dashboard",
        "namespace": namespace,
        "uid": d["uid"],
        "grafana": GRAFANA,
    }
    assert len(d["uid"]) <= 40
    valid(out)


def test_the_dashboard_draws_the_plan() -> None:
    xr = claim(
        autoscaling={
            "maxReplicas": 4,
            "latency": {"metric": "timeToFirstToken", "percentile": 99, "seconds": 2},
        }
    )
    out = run(xr, monitored(AWS))
    d = board(out)
    plan = out.status["plan"]
    panels = {p["title"]: [t["expr"] for t in p["targets"]] for p in d["panels"]}
    assert "vector(2)" in panels["Time to first token"]
    assert not [e for e in panels["Inter-token latency"] if e.startswith("vector(")]
    assert "vector(3)" in panels["Queue: waiting and running requests"]
    replicas = panels["Replicas against the GPU budget"]
    assert "vector(1)" in replicas and f"vector({out.status['replicas']['max']})" in replicas
    share = [e for e in panels["KV cache usage against the plan"] if e.startswith("vector(")]
    assert len(share) == 1 and 0 < float(share[0][7:-1]) <= 1
    assert str(plan["maxModelLen"]) in d["panels"][0]["description"]
    assert "__" not in json.dumps(d)
