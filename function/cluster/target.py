"""Where an LLMInference runs: the control plane itself, a ProviderConfig, or an
InferenceCluster whose status says which ProviderConfig, GPU and ingress class to use."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from function.claim.spec import LLMSpec, P, SpecError
from function.hosts import url_host
from function.kube import dig
from function.limits import ASSUMED_GPU, MAX_NODES_PER_REPLICA, GpuShape
from function.model.sizing import MAX_GPU_MEMORY_GIB, MAX_GPUS_PER_NODE
from function.plan.storage import SharedClass, parse_gib

CLUSTER_API_VERSION = "inference.devopstoolkit.ai/v1alpha1"
CLUSTER_KIND = "InferenceCluster"
REQUIREMENT = "inference-cluster"


@dataclass(frozen=True)
class Target:
    """Everything the builders need to know about the target cluster."""

    provider_config: str | None  # None: compose directly into the control-plane cluster
    namespace: str
    gpu: GpuShape = ASSUMED_GPU
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    ingress_class: str | None = None
    cluster: str | None = None
    # The cluster's model-cache StorageClass and its stated read throughput (status.storage).
    storage_class: str | None = None
    storage_read_mib_s: float | None = None
    storage_read_mib_s_per_gib: float | None = None
    # Its ReadWriteMany class, which engine pods on several nodes share (status.storage.shared).
    shared_storage: SharedClass | None = None
    # What one pod may request on a GPU node (status.gpu.allocatable), its instance type,
    # and the RuntimeClass GPU pods run with (status.gpu.runtimeClassName).
    pod_cpu_millicores: int | None = None
    pod_memory_mib: int | None = None
    instance_type: str | None = None
    runtime_class: str | None = None
    # Secrets that hold the cluster's own credentials (status.credentialsSecrets): never copied.
    credential_secrets: tuple[str, ...] = ()
    # Whether provider-kubernetes may watch what it applies there: not with a scoped identity,
    # whose RBAC grants no cluster-wide list/watch (it polls instead).
    watch: bool = True
    # Target namespaces the cluster allows besides the claim's own, and the ones it reserves
    # for its apps (status.tenancy).
    allowed_namespaces: tuple[str, ...] = ()
    reserved_namespaces: tuple[str, ...] = ()
    # GPU nodes the pool may grow to (status.gpu.maxNodes): with per_node, the GPU budget.
    max_nodes: int | None = None
    # Whether the cluster runs KEDA (status.apps.keda), which autoscaling needs, and the
    # name of its Release on the control plane (status.keda.release).
    keda: bool = False
    keda_release: str | None = None
    # Whether the cluster runs LeaderWorkerSet (status.apps.lws): a replica may then span
    # up to max_nodes nodes.
    lws: bool = False
    # The llm-d backend (status.apps.llmd): the Gateway llm-d models attach their HTTPRoutes
    # to, (namespace, name), and its in-cluster URL (status.llmd); whether the GPU nodes have
    # an RDMA network, and the resource its device plugin advertises (status.gpu.rdma).
    llmd_gateway: tuple[str, str] | None = None
    llmd_endpoint: str | None = None
    rdma: bool = False
    rdma_resource: str | None = None

    @property
    def span(self) -> int:
        """Nodes one replica may span here."""
        if not self.lws or not self.max_nodes:
            return 1
        return min(self.max_nodes, MAX_NODES_PER_REPLICA)

    # The namespace its vLLM router discovers engines in, and where the router is reached
    # (status.vllm.namespace, status.endpoint).
    router_namespace: str | None = None
    router_endpoint: str | None = None
    # Whether what the model exposes is served by the control plane's own ingress controller,
    # which every namespace shares (no cluster, or an InferenceCluster of provider `local`).
    control_plane: bool = False
    # Addresses the platform team lets engines send their KV cache to, and the largest model
    # cache a claim may ask for (status.tenancy.kvTransferHosts, .maxModelCacheSize).
    kv_transfer_hosts: tuple[str, ...] = ()
    max_cache_gib: int | None = None
    # Hosts besides public DNS names a model's weights may come from (an S3 endpoint inside
    # the cluster or the private network): status.tenancy.modelSourceHosts.
    model_source_hosts: tuple[str, ...] = ()
    # Its monitoring (status.apps.monitoring, status.monitoring): Prometheus's and Grafana's
    # in-cluster URLs, and the label Grafana's sidecar loads dashboard ConfigMaps by.
    monitoring: Monitoring | None = None
    # LMCache's shared KV cache beside the router (status.vllm.cacheServer): (url, serde).
    cache_server: tuple[str, str] | None = None

    @property
    def router_host(self) -> str | None:
        """The public host of the cluster's router (apps.vllm.endpoint.host), if it has one."""
        return url_host(self.router_endpoint)

    @property
    def routed(self) -> bool:
        """Whether the cluster's router serves what runs in the target namespace."""
        return self.router_namespace is not None and self.router_namespace == self.namespace

    @property
    def suffix(self) -> str:
        """What the composition resource names (and Object names) of this target end with:
        nothing on the control plane; for another cluster, a digest of its ProviderConfig and
        namespace. Crossplane keeps a composed resource's name for its key, so moving a model
        (targetNamespace, clusterRef, the cluster's router namespace) must use new keys:
        Crossplane then composes new Objects and deletes the old ones through their own
        ProviderConfig, instead of re-pointing them and leaving the old engine running."""
        if self.provider_config is None:
            return ""
        where = f"{self.provider_config}/{self.namespace}".encode()
        return "-" + hashlib.sha256(where).hexdigest()[:6]


@dataclass(frozen=True)
class Monitoring:
    """What the cluster publishes of its monitoring (docs/inferencecluster.md)."""

    prometheus: str
    dashboard_label: tuple[tuple[str, str], ...]
    grafana: str | None = None


class ClusterNotReady(Exception):
    """The InferenceCluster exists but has not published what models need yet."""


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def without_cluster(spec: LLMSpec) -> Target:
    """Target for `providerConfigName` or for the control-plane cluster itself."""
    if spec.provider_config_name:
        return Target(
            provider_config=spec.provider_config_name,
            namespace=spec.target_namespace or spec.namespace,
        )
    return Target(provider_config=None, namespace=spec.namespace, control_plane=True)


def from_cluster(spec: LLMSpec, cluster: dict[str, Any]) -> Target:
    """Target read from an InferenceCluster's status; SpecError when the cluster cannot serve
    models, ClusterNotReady while it has not published its ProviderConfig and GPU facts. A
    simulated model (engine.simulate) needs no GPU: a cluster without a GPU pool or GPU
    Operator serves it, planned for the GPU the cluster declares or the assumed one."""
    simulate = spec.engine.simulate
    ref = f"InferenceCluster {spec.namespace}/{spec.cluster_ref}"
    field_ = spec.cluster_field
    status = cluster.get("status") if isinstance(cluster.get("status"), dict) else {}
    apps = dig(status, "apps")
    if not isinstance(apps, dict):
        raise ClusterNotReady(f"{ref} has not published status.apps yet")
    if spec.llmd and apps.get("llmd") is not True:
        raise SpecError(
            f"{P}.backend",
            "llmd",
            f"{P}.backend: llmd needs llm-d on the cluster, and {ref} does not run it (no "
            f"Gateway, InferencePool CRD or endpoint picker CRDs): set "
            f"spec.parameters.apps.llmd.enabled: true on {ref}, or use {P}.backend: "
            "productionStack",
        )
    if not spec.llmd and apps.get("vllm") is not True:
        raise SpecError(
            field_,
            spec.cluster_ref,
            f"{ref} does not run the vLLM Production Stack, so nothing would reconcile the "
            f"model's VLLMRuntime: set spec.parameters.apps.vllm.enabled: true on {ref}"
            + (f", or serve the model with {P}.backend: llmd" if apps.get("llmd") is True else ""),
        )
    gateway = dig(status, "llmd", "gateway")
    gateway_ref = None
    if spec.llmd:
        gw_name, gw_ns = dig(gateway, "name"), dig(gateway, "namespace")
        if not (isinstance(gw_name, str) and gw_name and isinstance(gw_ns, str) and gw_ns):
            raise ClusterNotReady(f"{ref} has not published its llm-d Gateway (status.llmd) yet")
        gateway_ref = (gw_ns, gw_name)
    rdma = dig(status, "gpu", "rdma", "enabled") is True
    rdma_resource = dig(status, "gpu", "rdma", "resource")
    if spec.disaggregation is not None and not rdma:
        raise SpecError(
            f"{P}.disaggregation",
            "prefill/decode",
            f"{P}.disaggregation: the prefill pods hand each request's KV cache to a decode "
            f"pod over NIXL, and {ref} declares no RDMA network for its GPU nodes (over TCP "
            "the transfer costs more than disaggregating saves): set "
            f"spec.parameters.gpu.rdma.enabled: true on {ref} if its GPU nodes have "
            "InfiniBand or RoCE, or remove disaggregation to serve the model aggregated",
        )
    llmd_endpoint = dig(status, "llmd", "endpoint")
    gpu = status.get("gpu") if isinstance(status.get("gpu"), dict) else {}
    if gpu.get("enabled") is False and not simulate:
        raise SpecError(
            field_,
            spec.cluster_ref,
            f"{ref} has no GPU node pool: set spec.parameters.gpu.enabled: true on {ref}",
        )
    # Models act through the cluster's models ProviderConfig (scoped on local and existing).
    models_pc = dig(status, "modelsProviderConfig", "name")
    provider_config = models_pc if isinstance(models_pc, str) and models_pc else None
    provider_config = provider_config or status.get("providerConfigName")
    scoped = dig(status, "modelsProviderConfig", "scoped") is True
    memory = _num(gpu.get("memoryGiB"))
    per_node = _num(gpu.get("perNode"))
    if not isinstance(provider_config, str) or not provider_config:
        raise ClusterNotReady(f"{ref} has not published status.providerConfigName yet")
    if dig(status, "modelsProviderConfig", "ready") is False:
        # Composed before, every object would fail in provider-kubernetes and back off for a
        # minute and more (kcl/inferencecluster/program/identity.k). Absent: a cluster
        # composed before the field, read as ready.
        raise ClusterNotReady(
            f"{ref} has not made the models' identity ready yet (status.modelsProviderConfig"
            f".ready: false: the RBAC of ProviderConfig {provider_config} on the cluster, and "
            "on a local cluster the CA of its kubeconfig); the model is composed once it is"
        )
    no_gpu = memory is None or memory <= 0 or per_node is None or per_node < 1
    if no_gpu and not (simulate and gpu.get("enabled") is False):
        raise ClusterNotReady(
            f"{ref} has not published its GPU (status.gpu.memoryGiB, status.gpu.perNode) yet"
        )
    if not no_gpu and (per_node > MAX_GPUS_PER_NODE or memory > MAX_GPU_MEMORY_GIB):
        # No GPU node has that: read as not published, never sized (sizing refuses it).
        raise ClusterNotReady(
            f"{ref} publishes status.gpu.perNode {per_node:g} and memoryGiB {memory:g}, which "
            f"no GPU node has (1 to {MAX_GPUS_PER_NODE} GPUs of at most "
            f"{MAX_GPU_MEMORY_GIB:g} GiB): check spec.parameters.gpu on {ref}"
        )
    runtime_class = gpu.get("runtimeClassName")
    if (not isinstance(runtime_class, str) or not runtime_class) and not simulate:
        raise SpecError(
            field_,
            spec.cluster_ref,
            f"{ref} runs no NVIDIA GPU Operator, so its GPU nodes have no device plugin or "
            f"RuntimeClass for the engine's pods: set spec.parameters.apps.nvidia.enabled: "
            f"true on {ref}",
        )
    allocatable = gpu.get("allocatable") if isinstance(gpu.get("allocatable"), dict) else {}
    pod_cpu, pod_memory = _num(allocatable.get("cpuMillicores")), _num(allocatable.get("memoryMiB"))
    instance = gpu.get("instanceType")
    selector = gpu.get("nodeSelector") if isinstance(gpu.get("nodeSelector"), dict) else {}
    tolerations = gpu.get("tolerations") if isinstance(gpu.get("tolerations"), list) else []
    ingress_class = status.get("ingressClassName")
    gpu_type = gpu.get("type")
    # The cluster's vLLM router discovers engines in its own namespace: deploy there.
    router_ns = dig(status, "vllm", "namespace")
    storage_class = dig(status, "storage", "className")
    read_rate = _num(dig(status, "storage", "readMiBps"))
    read_per_gib = _num(dig(status, "storage", "readMiBpsPerGiB"))
    max_nodes = _num(gpu.get("maxNodes"))
    shared = _shared_storage(dig(status, "storage", "shared"))
    endpoint = status.get("endpoint")
    keda_release = dig(status, "keda", "release")
    # The cluster's vLLM router discovers engines in its namespace: a production-stack model
    # goes there; an llm-d model brings its own router, into the claim's namespace.
    default_ns = router_ns if isinstance(router_ns, str) and router_ns and not spec.llmd else None
    return Target(
        provider_config=provider_config,
        namespace=spec.target_namespace or default_ns or spec.namespace,
        gpu=ASSUMED_GPU
        if no_gpu
        else GpuShape(
            memory_gib=memory,
            per_node=int(per_node),
            type=gpu_type if isinstance(gpu_type, str) else None,
            assumed=False,
        ),
        node_selector={str(k): str(v) for k, v in selector.items()},
        tolerations=tuple(t for t in tolerations if isinstance(t, dict)),
        ingress_class=ingress_class if isinstance(ingress_class, str) else None,
        cluster=spec.cluster_ref,
        storage_class=storage_class if isinstance(storage_class, str) and storage_class else None,
        storage_read_mib_s=read_rate if read_rate and read_rate > 0 else None,
        storage_read_mib_s_per_gib=read_per_gib if read_per_gib and read_per_gib > 0 else None,
        shared_storage=shared,
        pod_cpu_millicores=int(pod_cpu) if pod_cpu and pod_cpu > 0 else None,
        pod_memory_mib=int(pod_memory) if pod_memory and pod_memory > 0 else None,
        instance_type=instance if isinstance(instance, str) and instance else None,
        runtime_class=runtime_class if isinstance(runtime_class, str) and runtime_class else None,
        credential_secrets=_strings(status.get("credentialsSecrets")),
        watch=not scoped,
        # The router's namespace is the platform team's choice of where models run.
        allowed_namespaces=_strings(dig(status, "tenancy", "allowedNamespaces"))
        + ((router_ns,) if isinstance(router_ns, str) and router_ns else ()),
        reserved_namespaces=_strings(dig(status, "tenancy", "reservedNamespaces")),
        max_nodes=int(max_nodes) if max_nodes and max_nodes >= 1 and not no_gpu else None,
        keda=dig(status, "apps", "keda") is True,
        lws=dig(status, "apps", "lws") is True,
        keda_release=keda_release if isinstance(keda_release, str) and keda_release else None,
        router_namespace=router_ns if isinstance(router_ns, str) and router_ns else None,
        llmd_gateway=gateway_ref,
        llmd_endpoint=llmd_endpoint if isinstance(llmd_endpoint, str) and llmd_endpoint else None,
        rdma=rdma,
        rdma_resource=rdma_resource if isinstance(rdma_resource, str) and rdma_resource else None,
        router_endpoint=endpoint if isinstance(endpoint, str) and endpoint else None,
        control_plane=dig(cluster, "spec", "parameters", "provider") == "local",
        kv_transfer_hosts=_strings(dig(status, "tenancy", "kvTransferHosts")),
        model_source_hosts=_strings(dig(status, "tenancy", "modelSourceHosts")),
        max_cache_gib=parse_gib(dig(status, "tenancy", "maxModelCacheSize")),
        monitoring=monitoring_of(status),
        cache_server=_cache_server(dig(status, "vllm", "cacheServer")),
    )


def monitoring_of(status: dict[str, Any]) -> Monitoring | None:
    """status.apps.monitoring and status.monitoring, when the cluster runs it and has published
    a Prometheus URL and a dashboard label (else None: the model behaves as without it)."""
    from function.monitoring.names import valid_label, valid_url

    if dig(status, "apps", "monitoring") is not True:
        return None
    prometheus = dig(status, "monitoring", "prometheus")
    label = dig(status, "monitoring", "dashboardLabel")
    grafana = dig(status, "monitoring", "grafana")
    if not valid_url(prometheus) or not isinstance(label, dict) or not label:
        return None
    pairs = tuple(sorted((k, v) for k, v in label.items() if valid_label(k, v)))
    if len(pairs) != len(label):
        return None
    return Monitoring(
        prometheus=prometheus,
        dashboard_label=pairs,
        grafana=grafana if valid_url(grafana) else None,
    )


def _cache_server(value: object) -> tuple[str, str] | None:
    """status.vllm.cacheServer: LMCache's remote URL (lm://host:port) and serde."""
    url, serde = dig(value, "url"), dig(value, "serde")
    if not isinstance(url, str) or not url.startswith("lm://"):
        return None
    return url, serde if isinstance(serde, str) and serde else "naive"


def _shared_storage(value: object) -> SharedClass | None:
    """status.storage.shared: the cluster's ReadWriteMany class and how fast it reads."""
    if not isinstance(value, dict):
        return None
    name = value.get("className")
    if not isinstance(name, str) or not name:
        return None
    rate, per_gib, least = (_num(value.get(k)) for k in ("readMiBps", "readMiBpsPerGiB", "minGiB"))
    return SharedClass(
        name=name,
        read_mib_s=rate if rate and rate > 0 else None,
        read_mib_s_per_gib=per_gib if per_gib and per_gib > 0 else None,
        min_gib=int(least) if least and least >= 1 else None,
    )


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()
