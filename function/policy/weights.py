"""Where a claim's weights may come from (spec.parameters.source).

- pvc://: a PersistentVolumeClaim of the claim's own namespace, never of the namespace a
  targetNamespace names (one the cluster shares between teams).
- s3:// with an endpoint: a public DNS name, or a host the platform team listed for the
  target cluster (InferenceCluster spec.parameters.tenancy.modelSourceHosts). An address
  inside the cluster or a private network (a Service, a node, the cloud's metadata endpoint)
  is another team's or the platform's: a claim may not point its download Job at it. Plain
  http only to a listed host: to a public one, anyone on the way could swap the weights.
"""

from __future__ import annotations

from function import hosts
from function.claim.spec import LLMSpec, P, SpecError
from function.cluster.target import Target


def check_source(spec: LLMSpec, target: Target) -> None:
    source = spec.source
    if source is not None and source.scheme == "pvc" and target.namespace != spec.namespace:
        # The Job mounts the claim in the namespace the model deploys into: with
        # targetNamespace another one (a namespace the cluster shares), that namespace's
        # claims, which are not this team's.
        raise SpecError(
            f"{P}.source.uri",
            source.uri,
            problem=f"pvc:// reads a PersistentVolumeClaim of the namespace the model deploys "
            f"into, and this model deploys into {target.namespace} ({P}.targetNamespace), not "
            f"its own namespace {spec.namespace}: a claim reads only its own namespace's "
            f"claims. Deploy into {spec.namespace}, or stage the weights where it can read "
            "them (s3://, oci://)",
        )
    if source is None or source.endpoint is None:
        return
    host = source.endpoint_host or ""
    field = f"{P}.source.endpoint"
    listed = host in target.model_source_hosts
    where = (
        f"spec.parameters.tenancy.modelSourceHosts of InferenceCluster "
        f"{spec.namespace}/{target.cluster}"
        if target.cluster
        else "an InferenceCluster's spec.parameters.tenancy.modelSourceHosts (then name it in "
        f"{P}.clusterRef)"
    )
    if not listed and not hosts.public_dns_name(host):
        raise SpecError(
            field,
            source.endpoint,
            problem=f"{host} is not a public DNS name (an address inside the cluster or a "
            "private network), and the platform team has not listed it; the download Job "
            f"reads weights from public S3 endpoints, or from a host listed in {where}",
        )
    if not listed and source.endpoint.startswith("http://"):
        raise SpecError(
            field,
            source.endpoint,
            problem=f"{source.endpoint} is plain http to a public host, where anyone on the way "
            f"could swap the weights; use https, or have the platform team list {host} in "
            f"{where}",
        )
