"""What a claim may ask of monitoring where it runs."""

from __future__ import annotations

from function.claim.spec import LLMSpec, P, SpecError
from function.cluster.target import Target


def check_latency_target(spec: LLMSpec, target: Target) -> None:
    """A latency target is a percentile of a histogram over time, which only Prometheus
    computes (KEDA's metrics-api scaler reads one gauge per pod): refused where the model's
    cluster publishes no Prometheus."""
    latency = spec.autoscaling.latency if spec.autoscaling else None
    if latency is None or target.monitoring is not None:
        return
    field = f"{P}.autoscaling.latency"
    where = (
        f"InferenceCluster {spec.namespace}/{target.cluster} runs no monitoring: set "
        f"spec.parameters.apps.monitoring.enabled: true on it"
        if target.cluster
        else f"the model runs on no InferenceCluster ({P}.clusterRef), so there is no "
        "Prometheus: name an InferenceCluster with spec.parameters.apps.monitoring.enabled: true"
    )
    raise SpecError(
        field,
        latency.metric,
        f"{field}: a {latency.metric} p{latency.percentile} target is computed by the "
        f"cluster's Prometheus from vLLM's histograms, and {where}; or remove {field} to "
        f"scale on {P}.autoscaling.metric alone",
    )
