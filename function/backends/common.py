"""Objects every backend composes the same way: an object placed on the target, the engine's
namespace, Ingress, KEDA scaler, Usages, the pods' Secrets and environment, and no takeover
of another claim's objects."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from function import kube
from function.backends import pods, resources, weights
from function.backends.weights import Fill
from function.claim.spec import LLMSpec, P, SecretRef, SpecError
from function.cluster.target import CLUSTER_KIND, Target
from function.keys import (
    API_KEY,
    CLUSTER_USAGE,
    ENV_SECRET,
    HF_TOKEN,
    INGRESS,
    KEDA_USAGE,
    NAMESPACE,
    PULL_SECRET,
    SCALER,
    SOURCE_SECRET,
)
from function.kube import dig
from function.model import catalog, sizing
from function.model.facts import hf_token_ref
from function.outcome import Inputs, Outcome
from function.plan import scaling, storage
from function.policy import ownership
from function.policy.secrets import PULL_SECRET_KEY, PULL_SECRET_TYPE, Secrets, fetch_copyable


def copy_secrets(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    target: Target,
    name: str,
    inputs: Inputs,
    out: Outcome,
) -> Secrets:
    """The Hugging Face token and the API key, by reference. On another cluster each is
    copied per model (one key, from an Opaque Secret that is not the cluster's own
    credentials) and owned by that model's Object; the copy waits until Crossplane has
    fetched the source to check it."""
    wanted = {HF_TOKEN: hf_token_ref(spec, facts), API_KEY: spec.api_key_secret}
    fields = {HF_TOKEN: f"{P}.hfTokenSecretRef", API_KEY: f"{P}.apiKeySecretRef"}
    engine_env, pull = engine_secrets(spec, target, inputs, out)
    source_env = source_secrets(spec, target, inputs, out)
    if target.provider_config is None:
        return Secrets(
            *((ref.name, ref.key) if ref else None for ref in (wanted[HF_TOKEN], wanted[API_KEY])),
            engine_env=engine_env,
            pull=pull,
            source_env=source_env,
        )
    placed: dict[str, tuple[str, str] | None] = {}
    for kind, ref in wanted.items():
        placed[kind] = None
        if ref is None:
            continue
        found = fetch_copyable(
            ref,
            fields[kind],
            f"secret-{kind}",
            spec.namespace,
            target,
            inputs,
            out,
            "the engine cannot start without it",
        )
        if found is None:
            continue
        copy_name = kube.dns_label(f"{spec.name}-{kind}")
        place_copy(spec, target, kind, ref, copy_name, out)
        placed[kind] = (copy_name, ref.key)
    return Secrets(placed[HF_TOKEN], placed[API_KEY], engine_env, pull, source_env)


def source_secrets(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[tuple[str, tuple[str, str]], ...]:
    """spec.parameters.source's S3 access key as the download Job reads it, each half checked
    and (on another cluster) copied like engine.env's Secrets."""
    creds = spec.source.credentials if spec.source is not None else None
    if creds is None:
        return ()
    field = f"{P}.source.credentialsSecretRef"
    remote = target.provider_config is not None
    env = []
    for i, (var, ref) in enumerate(
        (
            ("AWS_ACCESS_KEY_ID", creds.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", creds.secret_access_key),
        )
    ):
        name = _engine_secret(
            spec, target, inputs, out, SOURCE_SECRET, i, ref, field, False, "the download waits"
        )
        env.append((var, (name if remote else ref.name, ref.key)))
    return tuple(env)


def engine_secrets(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[tuple[tuple[str, tuple[str, str]], ...], tuple[str, ...]]:
    """engine.env's Secret variables and engine.imagePullSecrets as the pods on the target
    read them. Each Secret is fetched and checked wherever the model runs (of the claim's
    namespace, not a cluster's credentials, of the right type, with the key); on another
    cluster it is copied by reference, per model. A Secret not fetched or not copied yet is
    pointed at anyway: the pods wait for it (fail closed) rather than start without it."""
    remote = target.provider_config is not None
    env: list[tuple[str, tuple[str, str]]] = []
    for i, var, ref in spec.engine.secret_env:
        field = f"{P}.engine.env[{i}].valueFrom.secretKeyRef"
        name = _engine_secret(spec, target, inputs, out, ENV_SECRET, i, ref, field, False)
        env.append((var, (name if remote else ref.name, ref.key)))
    pull: list[str] = []
    for i, secret in enumerate(spec.engine.image_pull_secrets):
        field = f"{P}.engine.imagePullSecrets[{i}].name"
        ref = SecretRef(name=secret, key=PULL_SECRET_KEY)
        name = _engine_secret(spec, target, inputs, out, PULL_SECRET, i, ref, field, True)
        pull.append(name if remote else secret)
    return tuple(env), tuple(pull)


def _engine_secret(
    spec: LLMSpec,
    target: Target,
    inputs: Inputs,
    out: Outcome,
    kind: str,
    index: int,
    ref: SecretRef,
    field: str,
    pull: bool,
    without: str = "the engine's pods wait for it",
) -> str:
    """Fetch and check the Secret `ref`; on another cluster, copy it there (once fetched):
    the name the pods read it by."""
    found = fetch_copyable(
        ref,
        field,
        f"{kind}-{index}",
        spec.namespace,
        target,
        inputs,
        out,
        without,
        pull=pull,
    )
    copy_name = kube.dns_label(f"{spec.name}-{kind}-{index}")
    if found is not None and target.provider_config is not None:
        type_ = PULL_SECRET_TYPE if pull else "Opaque"
        place_copy(spec, target, f"{kind}-{index}", ref, copy_name, out, type_)
    return copy_name


def place_copy(
    spec: LLMSpec,
    target: Target,
    key: str,
    ref: SecretRef,
    copy_name: str,
    out: Outcome,
    type_: str = "Opaque",
) -> None:
    """`copy_name` on the target cluster: one key of the claim's Secret `ref`, copied there by
    reference (its value is never in a manifest), composed as `key`."""
    secret, refs = resources.copied_secret(ref, spec.namespace, copy_name, target.namespace, type_)
    place(spec, target, key, secret, out, suffix=key, references=refs)


def place(
    spec: LLMSpec, target: Target, key: str, manifest: dict[str, Any], out: Outcome, **wrap: Any
) -> None:
    """Compose `manifest` under `key` directly, or for another cluster in a provider-kubernetes
    Object named `<claim>-<suffix>` (wrap: suffix, and wrap_in_object's options); both carry
    the target's suffix."""
    if target.provider_config is None:
        out.resources[key] = manifest
        return
    suffix = wrap.pop("suffix")
    wrap["watch"] = wrap.get("watch", False) and target.watch
    out.resources[key + target.suffix] = resources.wrap_in_object(
        ownership.annotate(manifest, ownership.owner(spec.namespace, spec.name)),
        name=kube.dns_label(f"{spec.name}-{suffix}{target.suffix}"),
        provider_config=target.provider_config,
        **wrap,
    )


def own_namespace(spec: LLMSpec, target: Target, out: Outcome) -> None:
    """An InferenceCluster creates the namespaces its models may use; through a bare
    ProviderConfig the model creates its own (and never deletes it)."""
    if target.provider_config is not None and target.cluster is None:
        place(
            spec,
            target,
            NAMESPACE,
            resources.namespace(target.namespace),
            out,
            suffix="namespace",
            management_policies=resources.NAMESPACE_POLICIES,
        )


def keep_engine(target: Target, key: str, observed: Any, autoscaled: bool, out: Outcome) -> None:
    """Compose the observed engine under `key` as it is (its pods keep serving), without the
    replica count when KEDA owns it."""
    kept = kube.desired_from_observed(observed)
    remote = target.provider_config is not None
    out.resources[key + target.suffix] = without_replicas(kept, remote) if autoscaled else kept


def hold_or_place(
    spec: LLMSpec,
    target: Target,
    key: str,
    manifest: dict[str, Any],
    out: Outcome,
    *,
    holding: bool,
    observed: Any,
    autoscaled: bool,
    **wrap: Any,
) -> None:
    """The engine `manifest` placed under `key`; while `holding` (a new model downloads beside
    the one that serves), the `observed` engine kept as it is instead."""
    if holding:
        keep_engine(target, key, observed, autoscaled, out)
    else:
        place(spec, target, key, manifest, out, **wrap)


def without_replicas(obj: dict[str, Any], remote: bool) -> dict[str, Any]:
    """A desired object (or its Object wrapper) without the replica count KEDA owns."""
    if not remote:
        return resources.omit_replicas(obj)
    out = json.loads(json.dumps(obj))
    manifest = dig(out, "spec", "forProvider", "manifest")
    if isinstance(manifest, dict):
        out["spec"]["forProvider"]["manifest"] = resources.omit_replicas(manifest)
    return out


def ingress(
    spec: LLMSpec, target: Target, name: str, out: Outcome, service: str | None = None
) -> None:
    if spec.ingress_host:
        place(
            spec,
            target,
            INGRESS,
            resources.ingress(
                name=name,
                namespace=target.namespace,
                host=spec.ingress_host,
                service=service or name,
                class_name=target.ingress_class,
                model=spec.model,
            ),
            out,
            suffix="ingress",
        )


def tail(
    spec: LLMSpec,
    target: Target,
    count: scaling.Replicas,
    inputs: Inputs,
    out: Outcome,
    *,
    by_key: str,
    ingress_to: str | None = None,
    service: str | None = None,
) -> None:
    """What every backend composes beside its engine, last: the Ingress of `ingress_to`
    (through `service`; none for llm-d, whose Gateway route is its own), the Usages of the
    cluster (by the object `by_key`) and of its KEDA, and no takeover of what is not ours."""
    if ingress_to is not None:
        ingress(spec, target, ingress_to, out, service=service)
    cluster_usage(spec, target, inputs, out, by_key)
    keda_usage(spec, target, count, inputs, out)
    no_takeover(spec, target, inputs, out)


def composed_ref(out: Outcome, *keys: str) -> dict[str, Any] | None:
    """A Usage's reference to the first of `keys` this reconcile composes (its kind and the
    name it has there), or None."""
    for key in keys:
        obj = out.resources.get(key)
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
        if isinstance(name, str) and name:
            return {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "resourceRef": {"name": name},
            }
    return None


def cluster_usage(spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome, by_key: str) -> None:
    """A Usage of the model's cluster by its object `by_key` there (the engine, or the
    Service in front of it), which every backend composes on a cluster."""
    if target.cluster and not composed_by_cluster(inputs.xr, target.cluster):
        by = composed_ref(out, by_key + target.suffix)
        if by is None:
            return
        out.resources[CLUSTER_USAGE] = resources.cluster_usage(
            name=kube.dns_label(f"{spec.name}-uses-{target.cluster}"),
            cluster=target.cluster,
            by=by,
        )


# What KEDA scales: a VLLMRuntime through its scale subresource, or a Deployment.
RUNTIME_SCALE_TARGET = {"apiVersion": "production-stack.vllm.ai/v1alpha1", "kind": "VLLMRuntime"}


DEPLOYMENT_SCALE_TARGET = {"apiVersion": "apps/v1", "kind": "Deployment"}


def scaler(
    spec: LLMSpec,
    target: Target,
    name: str,
    count: scaling.Replicas,
    scale_target: dict[str, str],
    out: Outcome,
    service: str | None = None,
) -> None:
    """KEDA's ScaledObject for the engine (spec.autoscaling), reading vLLM's gauge from every
    ready pod behind the engine's Service, or from the cluster's Prometheus when it has one
    (function/plan/scaling.py); `name` is the engine pods' app.kubernetes.io/name."""
    assert spec.autoscaling is not None
    place(
        spec,
        target,
        SCALER,
        resources.scaled_object(
            name=name,
            namespace=target.namespace,
            model=spec.model,
            target=scale_target,
            min_replicas=count.low,
            max_replicas=count.high,
            triggers=scaling.prometheus_triggers(
                spec.autoscaling,
                server=target.monitoring.prometheus,
                namespace=target.namespace,
                model=name,
            )
            if target.monitoring is not None
            else [
                scaling.trigger(
                    spec.autoscaling,
                    service=service or name,
                    namespace=target.namespace,
                    port=resources.ENGINE_PORT,
                    model=spec.model,
                )
            ],
            polling_interval_s=scaling.POLLING_INTERVAL_S,
            scale_down_delay_s=spec.autoscaling.scale_down_delay_s,
            scale_down_policy=scaling.SCALE_DOWN_POLICY,
        ),
        out,
        suffix="scaledobject",
    )


def keda_usage(
    spec: LLMSpec, target: Target, count: scaling.Replicas, inputs: Inputs, out: Outcome
) -> None:
    """A Usage that keeps the cluster's KEDA Release while this model autoscales: turning
    apps.keda off would otherwise uninstall KEDA under the model's ScaledObject, whose
    finalizer only KEDA removes."""
    # The cluster's own models (spec.parameters.models) need none: its program refuses
    # apps.keda off while one of them autoscales, and its deletion removes them first.
    by = composed_ref(out, SCALER + target.suffix)
    if (
        count.autoscaled
        and target.cluster
        and target.keda_release
        and by is not None
        and not composed_by_cluster(inputs.xr, target.cluster)
    ):
        out.resources[KEDA_USAGE] = resources.usage(
            name=kube.dns_label(f"{spec.name}-uses-{target.keda_release}"),
            of={
                "apiVersion": "helm.m.crossplane.io/v1beta1",
                "kind": "Release",
                "resourceRef": {"name": target.keda_release},
            },
            by=by,  # the ScaledObject, whose finalizer only KEDA removes
            replay_deletion=True,
        )


def pod_secret_env(spec: LLMSpec, secrets: Secrets) -> list[tuple[str, tuple[str, str]]]:
    """The Secrets such a pod reads: the Hugging Face token (the download's) and the API key
    (vLLM's envs.VLLM_API_KEY). A key not copied yet is pointed at anyway, so the pods wait
    for the copy (fail closed) instead of serving without one."""
    api_key = secrets.api_key
    if spec.api_key_secret is not None and api_key is None:
        api_key = (kube.dns_label(f"{spec.name}-{API_KEY}"), spec.api_key_secret.key)
    out = [("HF_TOKEN", secrets.hf_token)] if secrets.hf_token else []
    if api_key:
        out.append(("VLLM_API_KEY", api_key))
    return out + list(secrets.engine_env)


def pod_env(spec: LLMSpec, plan: sizing.Plan) -> list[tuple[str, str]]:
    """The plan's and the claim's variables; the weights come from the pod's cache, so vLLM
    stays offline."""
    return [*plan.env, *spec.engine.env, ("HF_HUB_OFFLINE", "1")]


@dataclass(frozen=True)
class OwnPods:
    """What every vLLM pod a backend writes itself shares for one claim (pods.VllmPod): the
    engine image, the claim's Secrets as the target reads them, how the model cache fills,
    its class, and the shared claim all pods mount (None: each its own)."""

    spec: LLMSpec
    target: Target
    image: str
    secrets: Secrets
    fill: Fill
    class_name: str | None
    shared_claim: str | None

    def pod(self, plan: sizing.Plan, args: list[str], cache: storage.CachePlan) -> pods.VllmPod:
        """The pod of `plan` running `vllm serve args`, its own cache of `cache`'s size (or
        the shared claim)."""
        spec, target = self.spec, self.target
        fill = weights.fill_resources()
        return pods.VllmPod(
            image=self.image,
            args=tuple(args),
            env=tuple(pod_env(spec, plan)),
            secret_env=tuple(pod_secret_env(spec, self.secrets)),
            gpus=plan.gpus_per_node,
            cpu=plan.cpu,
            memory=plan.memory,
            shm_size=plan.shm_size,
            cache_size=storage.quantity(cache.size_gib),
            cache_class=self.class_name,
            shared_claim=self.shared_claim,
            fill=self.fill,
            node_selector=target.node_selector,
            tolerations=target.tolerations or None,
            runtime_class=target.runtime_class,
            pull_secrets=self.secrets.pull,
            fetch_requests=fill["requests"],
            fetch_memory_limit=fill["memory_limit"],
            # The init container has downloaded before the probes run: vLLM may take twice
            # the estimated start (weights read at the stated rate plus storage.ENGINE_INIT_S).
            startup_budget_s=2 * cache.start_s,
        )


def serve_args(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    max_len: int | None,
    extra: list[str],
    port: int = resources.ENGINE_PORT,
) -> list[str]:
    """`vllm serve` for such a pod, from the plan."""
    return pods.vllm_serve_args(
        model=weights.engine_model(spec),
        tensor_parallel=plan.tensor_parallel_size,
        nodes=plan.nodes,
        pipeline=plan.pipeline_parallel_size,
        max_model_len=max_len,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        enable_prefix_caching=plan.enable_prefix_caching,
        enable_chunked_prefill=plan.enable_chunked_prefill,
        tool_call_parser=facts.tool_call_parser if facts else None,
        extra_args=extra,
        port=port,
    )


def no_takeover(spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome) -> None:
    """Compose nothing over an object that exists and is not this claim's
    (function/policy/ownership.py): a new control-plane object only once Crossplane has shown it
    absent or ours; a new Object on another cluster observe-only until the provider has shown
    the same there."""
    claim_owner = ownership.owner(spec.namespace, spec.name)
    xr_uid = dig(inputs.xr, "metadata", "uid")
    where = (
        f"InferenceCluster {target.cluster}"
        if target.cluster
        else f"the cluster of ProviderConfig {target.provider_config}"
    )
    for key, desired in out.resources.items():
        kind = desired.get("kind", "")
        name = dig(desired, "metadata", "name")
        namespace = dig(desired, "metadata", "namespace") or spec.namespace
        observed = inputs.observed.get(key)
        if observed is None:
            requirement = f"existing-{key}"
            out.requirements[requirement] = {
                "apiVersion": desired.get("apiVersion", ""),
                "kind": kind,
                "matchName": name,
                "namespace": namespace,
            }
            found = inputs.required.get(requirement)
            why = ownership.foreign_on_control_plane(found[0], xr_uid) if found else None
            if why:
                raise SpecError(
                    "metadata.name",
                    spec.name,
                    f"metadata.name: {kind} {namespace}/{name} already exists and {why}; the "
                    "claim does not take it over. Give the claim another name, or delete or "
                    f"rename that {kind}",
                )
        manifest = dig(desired, "spec", "forProvider", "manifest")
        if kind != "Object" or not manifest or key == NAMESPACE + target.suffix:
            continue  # on the control plane; the namespace is created once, never taken
        state = ownership.remote(observed, claim_owner)
        if state.state == "probing":
            desired["spec"]["managementPolicies"] = list(ownership.PROBE_POLICIES)
        elif state.state == "foreign":
            found_owner = (
                f"it belongs to {state.found_owner}"
                if state.found_owner
                else f"it has no {ownership.OWNER_ANNOTATION} annotation"
            )
            what = f"{manifest.get('kind', '')} {dig(manifest, 'metadata', 'namespace')}/"
            what += str(dig(manifest, "metadata", "name"))
            raise SpecError(
                "metadata.name",
                spec.name,
                f"metadata.name: {what} already exists on {where} and {found_owner}; the "
                f"claim does not take it over. Give the claim another name (or another "
                f"{P}.targetNamespace), or remove that object there",
            )


def composed_by_cluster(xr: dict[str, Any], cluster: str) -> bool:
    """Whether this LLMInference is one of `cluster`'s own models (spec.parameters.models):
    its controller is that InferenceCluster. Such a model must not block its cluster's
    deletion, which deletes it first."""
    owners = dig(xr, "metadata", "ownerReferences")
    return any(
        isinstance(o, dict)
        and o.get("controller") is True
        and o.get("kind") == CLUSTER_KIND
        and o.get("name") == cluster
        for o in owners or []
    )
