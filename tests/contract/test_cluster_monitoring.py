"""InferenceCluster apps.monitoring, offline: the kube-prometheus-stack Release, the monitors
of the engines, the router, llm-d's endpoint pickers and KEDA, the vLLM dashboard, and the
status contract the function side reads (status.apps.monitoring, status.monitoring.*).

Rendered through the real Composition; every composed object and every wrapped manifest is
validated against the pinned upstream schemas (PodMonitor: schemas/prometheus-operator).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import EXAMPLES, PACKAGE, ROOT, parse_yaml

from dot_inference import vendor
from dot_inference.apiserver import schema_dirs, validate_objects
from dot_inference.crossplane.documents import load_package
from dot_inference.crossplane.render import default_runners, render
from function.backends.llmd.objects import COMPONENT as LLMD_COMPONENT
from function.backends.resources import PART_OF

ANSI = re.compile(r"\x1b\[[0-9;]*m")
DASHBOARDS = ROOT / "schemas" / "production-stack-dashboards"
EXAMPLE = "cluster-with-monitoring.yaml"

# The contract (docs/inferencecluster.md "Monitoring"; kcl/inferencecluster/program/monitoring.k).
PROMETHEUS = "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090"
GRAFANA = "http://kube-prometheus-stack-grafana.monitoring.svc.cluster.local"
DASHBOARD_LABEL = {"grafana_dashboard": "1"}

# Series the vLLM engine exports (vLLM V1's PrometheusStatLogger, vllm/v1/metrics/loggers.py;
# a histogram's _bucket/_sum/_count and a counter's _total are the same metric). The project
# runs 0.17.1; its tree was out of reach here (the vllm mirror exceeds the fetch limit and the
# PyPI index has no 0.17.1 wheel), so these names were read from a stored copy of loggers.py
# and V1 users of it; re-check them against v0.17.1 when it can be fetched.
VLLM_METRICS = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:time_to_first_token_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
}
# Series the production-stack router exports (vllm-stack-0.1.12
# src/vllm_router/services/metrics_service/__init__.py, src/vllm_router/routers/metrics_router.py).
ROUTER_METRICS = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:gpu_prefix_cache_hit_rate",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_queries_total",
    "vllm:current_qps",
    "vllm:healthy_pods_total",
    "vllm:avg_latency",
    "vllm:avg_itl",
    "router_cpu_usage_percent",
    "router_memory_usage_percent",
    "router_disk_usage_percent",
}
_SUFFIXES = ("_bucket", "_sum", "_count", "_total")
_METRIC = re.compile(r"\b((?:vllm:|router_)[a-z0-9_:]+)")


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pkg = load_package(PACKAGE)
    xrd = next(x for x in pkg.xrds if x["spec"]["names"]["kind"] == "InferenceCluster")
    composition = next(
        c for c in pkg.compositions if c["spec"]["compositeTypeRef"]["kind"] == "InferenceCluster"
    )
    schemas = tmp_path_factory.mktemp("monitoring")
    (schemas / "definition.yaml").write_text(yaml.safe_dump(xrd))
    upstream = [p for p in schema_dirs() if p.resolve() != PACKAGE.resolve()]
    return {"xrd": xrd, "composition": composition, "schemas": [*upstream, schemas]}


def _xr(apps: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "mon", "namespace": "a-team"},
        "spec": {"parameters": {"provider": "local", "apps": apps}},
    }


def _render(package: dict, xr: dict):
    return render(copy.deepcopy(xr), package["composition"], default_runners(), xrd=package["xrd"])


def _named(objs: list[dict]) -> dict[str, dict]:
    return {
        o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]: o
        for o in objs
        if "crossplane.io/composition-resource-name" in o["metadata"].get("annotations", {})
    }


@pytest.fixture(scope="module")
def monitored(package: dict):
    xr = parse_yaml((EXAMPLES / EXAMPLE).read_text())
    result = _render(package, xr)
    assert result.fatal is None, ANSI.sub("", result.fatal)
    return result


def test_every_monitor_validates_against_the_pinned_crds(monitored, package: dict) -> None:
    report = validate_objects(monitored.composed, schema_paths=package["schemas"])
    assert report.ok, report.summary()
    manifests = [
        o["spec"]["forProvider"]["manifest"] for o in monitored.composed if o["kind"] == "Object"
    ]
    monitors = [m for m in manifests if m["kind"] == "PodMonitor"]
    assert sorted(m["metadata"]["name"] for m in monitors) == [
        "dot-inference-endpoint-pickers",
        "dot-inference-engines",
    ]
    assert validate_objects(monitors, schema_paths=package["schemas"]).ok


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        pytest.param(
            lambda m: m["spec"]["podMetricsEndpoints"][0]["relabelings"][0].update(action="copy"),
            "action",
            id="unknown-relabel-action",
        ),
        pytest.param(
            lambda m: m["spec"]["podMetricsEndpoints"][0].update(scheme="ftp"),
            "scheme",
            id="bad-scheme",
        ),
        pytest.param(lambda m: m["spec"].update(selector="all"), "selector", id="selector-string"),
    ],
)
def test_the_pinned_podmonitor_crd_refuses_a_broken_monitor(
    monitored, package: dict, edit, message: str
) -> None:
    engines = _named(monitored.composed)["app-monitoring-engines"]
    broken = copy.deepcopy(engines["spec"]["forProvider"]["manifest"])
    edit(broken)
    report = validate_objects([broken], schema_paths=package["schemas"])
    assert not report.ok and message in report.summary()


def test_engines_are_scraped_by_the_routers_labels_with_namespace_pod_and_model(monitored) -> None:
    engines = _named(monitored.composed)["app-monitoring-engines"]["spec"]["forProvider"]
    spec = engines["manifest"]["spec"]
    assert spec["namespaceSelector"] == {"any": True}
    # The router's discovery selector (apps.k `_engineSelector`, as status.vllm publishes it)
    # and llm-d's engines (function/backends/llmd/objects.py).
    router = dict(p.split("=") for p in monitored.xr["status"]["vllm"]["engineSelector"].split(","))
    selector = spec["selector"]
    assert selector["matchLabels"] == {"app.kubernetes.io/part-of": PART_OF}
    (components,) = selector["matchExpressions"]
    assert components["key"] == "app.kubernetes.io/component" and components["operator"] == "In"
    assert components["values"] == [router["app.kubernetes.io/component"], LLMD_COMPONENT]
    assert router["app.kubernetes.io/part-of"] == PART_OF
    (endpoint,) = spec["podMetricsEndpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    assert endpoint["relabelings"] == [
        {
            "action": "replace",
            "sourceLabels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
            "targetLabel": "model",
        }
    ]


def test_status_publishes_the_contract(monitored) -> None:
    status = monitored.xr["status"]
    assert status["apps"]["monitoring"] is True
    assert status["monitoring"] == {
        "prometheus": PROMETHEUS,
        "grafana": GRAFANA,
        "dashboardLabel": DASHBOARD_LABEL,
    }


def test_prometheus_and_grafana_see_every_namespace_and_no_default_password(monitored) -> None:
    release = _named(monitored.composed)["app-monitoring"]
    fp = release["spec"]["forProvider"]
    assert fp["chart"]["name"] == "kube-prometheus-stack"
    assert fp["chart"]["repository"] == "https://prometheus-community.github.io/helm-charts"
    assert fp["chart"]["version"] == vendor.pins.pin("kcl/versions.k:kube_prometheus_stack")
    assert fp["namespace"] == "monitoring"
    spec = fp["values"]["prometheus"]["prometheusSpec"]
    for kind in ("serviceMonitor", "podMonitor"):
        assert spec[f"{kind}SelectorNilUsesHelmValues"] is False
        assert spec[f"{kind}Selector"] == {} and spec[f"{kind}NamespaceSelector"] == {}
    grafana = fp["values"]["grafana"]
    assert grafana["sidecar"]["dashboards"]["searchNamespace"] == "ALL"
    assert {grafana["sidecar"]["dashboards"][k] for k in ("label", "labelValue")} == {
        "grafana_dashboard",
        "1",
    }
    assert grafana["admin"] == {
        "existingSecret": "grafana-admin",
        "userKey": "admin-user",
        "passwordKey": "admin-password",
    }
    assert "adminPassword" not in json.dumps(fp["values"])


def test_without_a_secret_grafana_generates_its_password(package: dict) -> None:
    result = _render(package, _xr({"monitoring": {"enabled": True}}))
    assert result.fatal is None, result.fatal
    grafana = _named(result.composed)["app-monitoring"]["spec"]["forProvider"]["values"]["grafana"]
    assert "admin" not in grafana and "adminPassword" not in grafana


def test_router_and_keda_expose_their_monitors_only_with_monitoring(package: dict) -> None:
    apps = {"vllm": {"enabled": True}, "keda": {"enabled": True}}
    on = _named(_render(package, _xr({**apps, "monitoring": {"enabled": True}})).composed)
    off_result = _render(package, _xr(apps))
    off = _named(off_result.composed)
    router = on["app-vllm-stack"]["spec"]["forProvider"]["values"]["routerSpec"]
    assert router["serviceMonitor"] == {"enabled": True}
    keda = on["app-keda"]["spec"]["forProvider"]["values"]["prometheus"]
    assert keda["operator"]["serviceMonitor"]["enabled"]
    assert keda["metricServer"]["serviceMonitor"]["enabled"]
    assert (
        "serviceMonitor" not in off["app-vllm-stack"]["spec"]["forProvider"]["values"]["routerSpec"]
    )
    assert off["app-keda"]["spec"]["forProvider"]["values"] == {}
    assert not [k for k in off if k.startswith("app-monitoring")]
    assert not [
        o
        for o in off_result.composed
        if o["kind"] == "Usage" and "app-monitoring" in o["spec"]["by"]["resourceRef"]["name"]
    ]
    assert off_result.xr["status"]["apps"]["monitoring"] is False
    assert "monitoring" not in off_result.xr["status"]


def test_the_dashboard_configmap_carries_the_upstream_json_unmodified(monitored) -> None:
    cm = _named(monitored.composed)["app-monitoring-dashboard-vllm-dashboard"]
    manifest = cm["spec"]["forProvider"]["manifest"]
    assert manifest["kind"] == "ConfigMap" and manifest["metadata"]["namespace"] == "monitoring"
    assert DASHBOARD_LABEL.items() <= manifest["metadata"]["labels"].items()
    text = manifest["data"]["vllm-dashboard.json"]
    assert text == (DASHBOARDS / "vllm-dashboard.json").read_text()
    source = vendor.load("production-stack-dashboards")
    assert vendor.blob_id(text.encode()) == source.files["vllm-dashboard.json"]


def _queries(dashboard: dict) -> list[str]:
    def walk(panels: list[dict]):
        for p in panels:
            yield p
            yield from walk(p.get("panels", []))

    return [
        t["expr"] for p in walk(dashboard["panels"]) for t in p.get("targets", []) if "expr" in t
    ]


def _metric(name: str) -> str:
    for suffix in _SUFFIXES:
        if name.removesuffix(suffix) in VLLM_METRICS:
            return name.removesuffix(suffix)
    return name


@pytest.mark.parametrize("path", sorted(DASHBOARDS.glob("*.json")), ids=lambda p: p.name)
def test_dashboard_queries_name_metrics_that_are_exported(path: Path) -> None:
    dashboard = json.loads(path.read_text())
    queries = _queries(dashboard)
    assert len(queries) >= 10, "the vLLM dashboard's panels query Prometheus"
    names = {m for q in queries for m in _METRIC.findall(q)}
    unknown = {n for n in names if n not in ROUTER_METRICS and _metric(n) not in VLLM_METRICS}
    assert not unknown, f"{path.name} queries series nobody exports: {sorted(unknown)}"
    # The engine's series it reads, by vLLM's own names.
    assert {_metric(n) for n in names} & VLLM_METRICS >= {
        "vllm:e2e_request_latency_seconds",
        "vllm:time_to_first_token_seconds",
        "vllm:kv_cache_usage_perc",
    }


@pytest.mark.parametrize(
    ("monitoring", "message"),
    [
        pytest.param({"enabled": "yes"}, "apps.monitoring.enabled", id="enabled-not-bool"),
        pytest.param(
            {"enabled": True, "grafana": {"adminSecretRef": {"name": "../admin"}}},
            "adminSecretRef.name",
            id="secret-path",
        ),
        pytest.param(
            {"enabled": True, "grafana": {"adminSecretRef": {"name": "Admin"}}},
            "adminSecretRef.name",
            id="secret-uppercase",
        ),
        pytest.param(
            {"enabled": True, "grafana": {"adminSecretRef": {"name": "a" * 254}}},
            "adminSecretRef.name",
            id="secret-too-long",
        ),
        pytest.param(
            {"enabled": True, "grafana": {"adminSecretRef": {}}}, "name", id="secret-no-name"
        ),
        pytest.param(
            {"grafana": {"adminSecretRef": {"name": "admin"}}},
            "grafana.adminSecretRef applies only with apps.monitoring.enabled: true",
            id="secret-without-monitoring",
        ),
    ],
)
def test_xrd_refuses_bad_monitoring(monitoring: dict, message: str, package: dict) -> None:
    report = validate_objects([_xr({"monitoring": monitoring})], schema_paths=package["schemas"])
    assert not report.ok
    assert message in report.summary()


@pytest.mark.parametrize(
    ("monitoring", "message"),
    [
        pytest.param(
            {"enabled": True, "grafana": {"adminSecretRef": {"name": "a b"}}},
            "spec.parameters.apps.monitoring.grafana.adminSecretRef.name must be a Secret name",
            id="secret-space",
        ),
        pytest.param(
            {"enabled": True, "grafana": {"adminSecretRef": {"name": "-admin"}}},
            "got -admin",
            id="secret-leading-dash",
        ),
        pytest.param(
            {"grafana": {"adminSecretRef": {"name": "admin"}}},
            "spec.parameters.apps.monitoring.grafana.adminSecretRef applies only with "
            "spec.parameters.apps.monitoring.enabled: true",
            id="secret-without-monitoring",
        ),
    ],
)
def test_the_program_refuses_what_the_xrd_would(
    monitoring: dict, message: str, package: dict
) -> None:
    """Renders that skip the API server still fail, naming the field and what would work."""
    result = _render(package, _xr({"monitoring": monitoring}))
    assert result.fatal and message in ANSI.sub("", result.fatal)
    assert not result.composed
