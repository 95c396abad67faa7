"""PromQL over one model's engines, for KEDA's prometheus scaler and the model's dashboard.

vLLM exports, per engine pod (vllm/v1/metrics/loggers.py, PrometheusStatLogger): the gauges
`vllm:num_requests_waiting`, `vllm:num_requests_running` and `vllm:kv_cache_usage_perc` (0-1),
and the histograms `vllm:time_to_first_token_seconds` and `vllm:inter_token_latency_seconds`
(series `_bucket` with `le`), all labelled `model_name` and `engine`. Read in the stored
loggers.py (the gauges, TTFT) and in vLLM's V1 metrics design doc and the llm-d inference
simulator's docs/metrics.md (ITL, which replaced time_per_output_token); the vLLM v0.17.1
tree itself was too large to mirror here, so the names are not yet checked at that tag.

The cluster's PodMonitor adds `namespace`, `pod` and `model` (the engine pods'
app.kubernetes.io/name) to every series (docs/inferencecluster.md), which is what a query
selects on: a model's series are those of its own engine pods in its own namespace.

KEDA's prometheus scaler wants one sample back (kedacore/keda v2.20.2
pkg/scalers/prometheus_scaler.go: more than one element is an error, none is 0 with the
default ignoreNullValues), so every query aggregates to one series.
"""

from __future__ import annotations

from function.monitoring.names import selector

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_USAGE = "vllm:kv_cache_usage_perc"
HISTOGRAMS: dict[str, str] = {
    "timeToFirstToken": "vllm:time_to_first_token_seconds",
    "interTokenLatency": "vllm:inter_token_latency_seconds",
}
# The window a percentile is computed over: eight scrapes at the cluster's 15 s interval,
# long enough for a histogram's rate to have samples, short enough to follow load.
WINDOW = "2m"
# Every metric a query here uses (the dashboard's test checks its panels against these).
METRICS: tuple[str, ...] = (WAITING, RUNNING, KV_USAGE, *HISTOGRAMS.values())


def gauge(metric: str, namespace: str, model: str, aggregation: str = "sum") -> str:
    """`aggregation` (sum | avg | max) of a gauge over the model's engine pods."""
    if metric not in (WAITING, RUNNING, KV_USAGE) or aggregation not in ("sum", "avg", "max"):
        raise ValueError(f"no gauge query for {metric} by {aggregation}")
    return f"{aggregation}({metric}{{{selector(namespace, model)}}})"


def percentile(metric: str, quantile: int, namespace: str, model: str) -> str:
    """The `quantile`th percentile of one of vLLM's latency histograms over the model's
    engine pods, over WINDOW."""
    histogram = HISTOGRAMS[metric]
    if not 1 <= quantile <= 99:
        raise ValueError(f"percentile {quantile} is not from 1 to 99")
    return (
        f"histogram_quantile({quantile / 100:g}, sum by (le) "
        f"(rate({histogram}_bucket{{{selector(namespace, model)}}}[{WINDOW}])))"
    )
