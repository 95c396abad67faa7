"""The model cache every backend uses: its claims (one node, shared ReadWriteMany, per pod),
the fetch Job that fills them, and the ModelCache condition."""

from __future__ import annotations

import dataclasses
from typing import Any

from function import kube
from function.backends import cache_objects, weights
from function.backends.base import Fetch
from function.backends.common import place
from function.backends.weights import Fill
from function.claim.spec import LLMSpec, P, SpecError
from function.cluster.target import Target
from function.keys import CACHE, FETCH, SHARED_CACHE
from function.kube import dig
from function.model import catalog, sizing
from function.outcome import Condition, Inputs, Outcome, observed_manifest
from function.plan import scaling, storage


def fetch_job(spec: LLMSpec, target: Target, name: str, fill: Fill, inputs: Inputs) -> Fetch:
    remote = target.provider_config is not None
    job = cache_objects.fetch_job_name(name, fill.identity)
    key = f"{FETCH}-{job.rsplit('-', 1)[-1]}{target.suffix}"
    status = dig(observed_manifest(inputs.observed.get(key), remote), "status")
    succeeded = dig(status, "succeeded")
    failed = next(
        (
            str(c.get("message") or c.get("reason") or "failed")
            for c in dig(status, "conditions") or []
            if isinstance(c, dict) and c.get("type") == "Failed" and c.get("status") == "True"
        ),
        None,
    )
    done = isinstance(succeeded, int | float) and not isinstance(succeeded, bool) and succeeded >= 1
    return Fetch(job=job, key=key, done=done, failed=failed)


def cache_plan(
    spec: LLMSpec,
    target: Target,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    inputs: Inputs,
    layout: storage.Layout | None = None,
    claim_key: str = CACHE,
) -> tuple[storage.CachePlan, int | None]:
    """The cache plan and the size the claim (composed as `claim_key`) has now (None before
    it exists); on a shared layout, timed at the shared class's read rate and at least its
    smallest volume."""
    shared = layout.shared if layout is not None else None
    claim = observed_manifest(
        inputs.observed.get(claim_key + target.suffix), target.provider_config is not None
    )
    current = storage.parse_gib(dig(claim, "spec", "resources", "requests", "storage"))
    remote = target.provider_config is not None
    kept = [
        storage.parse_gib(dig(t, "spec", "resources", "requests", "storage"))
        for obj in inputs.observed.values()
        for t in claim_templates(observed_manifest(obj, remote))
    ]
    try:
        cache = storage.plan_cache(
            weights_gib=facts.checkpoint_gib if facts is not None else None,
            requested_gib=spec.storage.size_gib,
            observed_gib=current,
            load_rate_mib_s=shared.read_mib_s if shared else target.storage_read_mib_s,
            load_rate_mib_s_per_gib=shared.read_mib_s_per_gib
            if shared
            else target.storage_read_mib_s_per_gib,
            min_gib=shared.min_gib if shared else None,
            field=f"{P}.storage.size",
            max_gib=target.max_cache_gib,
            cap_field=f"spec.parameters.tenancy.maxModelCacheSize of InferenceCluster "
            f"{spec.namespace}/{target.cluster}",
            kept_gib=max((k for k in kept if k), default=None),
        )
    except storage.StorageError as e:
        raise SpecError(e.field, e.value, e.message) from e  # already says spec.parameters...
    return cache, current


def where_it_runs(spec: LLMSpec, target: Target) -> str:
    """The cluster a model runs on, as messages name it."""
    if target.cluster:
        return f"InferenceCluster {spec.namespace}/{target.cluster}"
    return (
        "the target cluster" if target.provider_config is not None else "the control-plane cluster"
    )


def cache_layout(
    spec: LLMSpec, target: Target, count: scaling.Replicas, inputs: Inputs
) -> storage.Layout:
    """How the engine pods share the one model-cache claim (function/plan/storage.py)."""
    remote = target.provider_config is not None
    claim = observed_manifest(inputs.observed.get(CACHE + target.suffix), remote)
    modes = dig(claim, "spec", "accessModes")
    observed = modes[0] if isinstance(modes, list) and modes else None
    where = where_it_runs(spec, target)
    try:
        # What the claim asks for, not what the budget leaves now: the layout must not change
        # when other models come and go.
        return storage.one_claim_layout(
            pods=count.asked_high,
            nodes=target.max_nodes if target.cluster else None,
            where=where,
            count_field=f"{P}.autoscaling.maxReplicas" if count.autoscaled else f"{P}.replicas",
            block_class=target.storage_class,
            shared=target.shared_storage,
            asked_class=spec.storage.class_name,
            asked_mode=spec.storage.access_mode,
            observed_mode=observed if observed in storage.ACCESS_MODES else None,
            field=f"{P}.storage",
        )
    except storage.StorageError as e:
        raise SpecError(e.field, e.value, e.message) from e


def per_pod_cache_status(
    caches: list[tuple[str, storage.Layout, storage.CachePlan]],
    class_name: str | None,
    note: str = "",
) -> dict[str, Any]:
    """status.plan.cache of pods with caches of their own (LeaderWorkerSet, llm-d): each
    side's pods at most, and what their volumes and downloads cost together."""
    claims = sum(layout.claims for _, layout, _ in caches)
    first = caches[0][2]
    return {
        "layout": "perPod",
        "accessMode": storage.READ_WRITE_ONCE,
        "claims": claims,
        "size": storage.quantity(first.size_gib),
        **({"storageClass": class_name} if class_name else {}),
        "disk": storage.quantity(sum(p.size_gib * layout.claims for _, layout, p in caches)),
        "downloads": sum(layout.downloads for _, layout, _ in caches),
        "reason": "; ".join(
            f"{role}: {layout.reason}" if len(caches) > 1 else layout.reason
            for role, layout, _ in caches
        )
        + note,
        "loadMiBps": first.load_rate_mib_s,
        "startSeconds": max(p.start_s for _, _, p in caches),
    }


def place_cache(
    spec: LLMSpec,
    target: Target,
    key: str,
    suffix: str,
    claim: str,
    fill: Fill,
    cache: storage.CachePlan,
    layout: storage.Layout,
    fetch: Fetch | None,
    out: Outcome,
    colocate: bool = False,
) -> None:
    """The model-cache claim `claim` and the Job that fills it (`fill`: from the Hub or the
    claim's source; none when `fetch` is None: the engine downloads itself)."""
    place(
        spec,
        target,
        key,
        cache_objects.model_cache_claim(
            name=claim,
            namespace=target.namespace,
            model=spec.model,
            size=storage.quantity(cache.size_gib),
            class_name=layout.class_name,
            access_mode=layout.access_mode,
        ),
        out,
        suffix=suffix,
    )
    if fetch is None:
        return
    place(
        spec,
        target,
        fetch.key.removesuffix(target.suffix),
        cache_objects.model_fetch_job(
            name=claim,
            job_name=fetch.job,
            namespace=target.namespace,
            model=spec.model,
            container=weights.fill_container(fill, name="fetch", **weights.fill_resources()),
            volumes=fill.volumes,
            node_selector=target.node_selector,
            tolerations=target.tolerations or None,
            deadline_seconds=cache.download_deadline_s,
            colocate=colocate,
            pull_secrets=fill.pull_secrets,
        ),
        out,
        suffix=f"fetch-{fetch.job.rsplit('-', 1)[-1]}",
        readiness_cel=cache_objects.JOB_DONE_CEL,
        watch=True,
    )


@dataclasses.dataclass(frozen=True)
class SharedCache:
    """The one ReadWriteMany cache of pods that would otherwise have one each (a multi-node
    replica's, llm-d's): its claim and whether its download has finished."""

    claim: str
    fetch: Fetch

    def holding(self, observed: Any, remote: bool) -> bool:
        """Whether the pods of `observed` run while a new download fills the cache: they are
        then kept as they are (a new revision downloads beside them)."""
        if self.fetch.done or observed is None:
            return False
        started = dig(observed_manifest(observed, remote), "spec", "replicas")
        return isinstance(started, int) and not isinstance(started, bool) and started >= 1


def many_pods_cache(
    spec: LLMSpec,
    target: Target,
    pods: int,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    fill: Fill,
    inputs: Inputs,
    out: Outcome,
) -> tuple[storage.Layout, storage.CachePlan, SharedCache | None]:
    """The cache layout of `pods` pods that could each have their own (storage.py), its plan,
    and on a shared layout the claim and its download Job, placed."""
    where = where_it_runs(spec, target)
    try:
        layout = storage.many_pods_layout(
            pods=pods,
            shared=target.shared_storage,
            block_class=target.storage_class,
            asked_class=spec.storage.class_name,
            asked_mode=spec.storage.access_mode,
            field=f"{P}.storage",
            where=where,
        )
    except storage.StorageError as e:
        raise SpecError(e.field, e.value, e.message) from e
    key = SHARED_CACHE if layout.mode == "shared" else CACHE
    cache, _ = cache_plan(spec, target, facts, plan, inputs, layout, key)
    if layout.mode != "shared":
        return layout, cache, None
    claim = kube.dns_label(f"{spec.name}-cache")
    fetch = fetch_job(spec, target, claim, fill, inputs)
    place_cache(spec, target, SHARED_CACHE, "shared-cache", claim, fill, cache, layout, fetch, out)
    return layout, cache, SharedCache(claim, fetch)


def shared_cache_status(
    spec: LLMSpec,
    target: Target,
    layout: storage.Layout,
    cache: storage.CachePlan,
    shared: SharedCache,
    out: Outcome,
) -> None:
    """status.plan.cache and the ModelCache condition of a shared cache."""
    claim = f"PersistentVolumeClaim {target.namespace}/{shared.claim}"
    job = f"Job {target.namespace}/{shared.fetch.job}"
    if shared.fetch.failed:
        condition = Condition(
            "ModelCache",
            "False",
            "DownloadFailed",
            f"{job} could not download {what(spec)}: {shared.fetch.failed}. Fix the cause "
            f"({hint(spec)}) and delete the Job to run it again",
        )
    elif shared.fetch.done:
        condition = Condition(
            "ModelCache", "True", "Cached", f"{what(spec)} is in {claim}, which every pod reads"
        )
    else:
        condition = Condition(
            "ModelCache",
            "False",
            "Downloading",
            f"{job} is downloading {what(spec)} into {claim} ({layout.class_name}, "
            f"{storage.quantity(cache.size_gib)}), deadline {cache.download_deadline_s} s; "
            "the pods start once it has",
        )
    out.conditions.append(condition)
    out.status_extra["cache"] = {
        "claim": shared.claim,
        "size": storage.quantity(cache.size_gib),
        **({"storageClass": layout.class_name} if layout.class_name else {}),
        **layout.status(cache.size_gib),
        "downloadJob": shared.fetch.job,
        "downloadDeadlineSeconds": cache.download_deadline_s,
        "loadMiBps": cache.load_rate_mib_s,
        "startSeconds": cache.start_s,
    }


def claim_templates(value: Any) -> list[dict[str, Any]]:
    """Every PersistentVolumeClaim template (`volumeClaimTemplates`) in an observed object:
    the per-pod caches of StatefulSets and LeaderWorkerSets."""
    if isinstance(value, dict):
        found = [t for t in value.get("volumeClaimTemplates") or [] if isinstance(t, dict)]
        return found + [
            t for k, v in value.items() if k != "volumeClaimTemplates" for t in claim_templates(v)
        ]
    if isinstance(value, list):
        return [t for v in value for t in claim_templates(v)]
    return []


def what(spec: LLMSpec) -> str:
    """What the download Job fetches, as messages name it."""
    return spec.model if spec.source is None else f"{spec.model} from {spec.source.uri}"


def hint(spec: LLMSpec) -> str:
    """The usual cause of a failed download, and its fix."""
    if spec.source is None:
        return f"a gated model needs {P}.hfTokenSecretRef"
    return {
        "s3": f"a private bucket needs {P}.source.credentialsSecretRef; the prefix must hold "
        "config.json",
        "pvc": f"the claim must exist in {spec.namespace} and be mountable read-only; the path "
        "must hold config.json",
        "oci": "a private image needs engine.imagePullSecrets; the image must hold the model "
        "under /models, with config.json, and a shell",
    }[spec.source.scheme]


def cache_condition(
    spec: LLMSpec,
    target: Target,
    name: str,
    cache: storage.CachePlan,
    class_name: str | None,
    fetch: Fetch,
    holding: bool,
    out: Outcome,
) -> None:
    claim = f"PersistentVolumeClaim {target.namespace}/{name} ({storage.quantity(cache.size_gib)}"
    claim += f", StorageClass {class_name})" if class_name else ", default StorageClass)"
    job = f"Job {target.namespace}/{fetch.job}"
    if fetch.failed:
        out.conditions.append(
            Condition(
                "ModelCache",
                "False",
                "DownloadFailed",
                f"{job} could not download {what(spec)}: {fetch.failed}. Fix the cause "
                f"({hint(spec)}; a full volume needs {P}.storage.size) and delete the Job to run "
                "it again",
            )
        )
    elif fetch.done:
        out.conditions.append(
            Condition(
                "ModelCache",
                "True",
                "Cached",
                f"{what(spec)} is in {claim}; the engine starts in about {cache.start_s} s "
                f"(reading at {cache.load_rate_mib_s:g} MiB/s), within the operator's "
                f"{cache.startup_budget_s} s startup probe"
                if cache.fits_startup_budget
                else f"{what(spec)} is in {claim}",
            )
        )
    else:
        size = f"{cache.weights_gib:.0f} GiB" if cache.weights_gib else "size unknown"
        out.conditions.append(
            Condition(
                "ModelCache",
                "False",
                "Downloading",
                f"{job} is downloading {what(spec)} ({size}) into {claim}, deadline "
                f"{cache.download_deadline_s} s"
                + ("; the model served until now keeps serving" if holding else ""),
            )
        )
    if not cache.fits_startup_budget:
        out.warnings.append(
            f"{spec.model}: the engine needs about {cache.start_s} s to read "
            f"{cache.weights_gib or cache.needed_gib:.0f} GiB at {cache.load_rate_mib_s:g} MiB/s "
            f"and start, more than the production-stack operator's fixed startup probe allows "
            f"({cache.startup_budget_s} s): the kubelet restarts it until the weights sit in "
            f"the node's page cache. Use a faster StorageClass ({P}.storage.className)"
        )
    if cache.weights_gib is None and spec.storage.size_gib is None:
        out.warnings.append(
            f"{spec.model}: its size is not known, so the model cache is "
            f"{storage.quantity(cache.size_gib)}; set {P}.storage.size if it needs more"
        )
