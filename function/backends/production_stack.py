"""Backend productionStack: one VLLMRuntime per model, served by the production-stack operator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from function import kube
from function.backends import weights
from function.backends.base import Backend, Build, Engine
from function.backends.cache import (
    cache_condition,
    cache_layout,
    cache_plan,
    fetch_job,
    place_cache,
)
from function.backends.cache_objects import CACHE_ENV, CACHE_MOUNT, ENGINE_PYTHON
from function.backends.common import (
    RUNTIME_SCALE_TARGET,
    copy_secrets,
    hold_or_place,
    own_namespace,
    scaler,
    tail,
)
from function.backends.lmcache import KV_TRANSFER_CONFIG, KV_TRANSFER_FLAG, lmcache
from function.backends.resources import (
    CONFIG_HASH_ANNOTATION,
    ENGINE_PORT,
    GPU_TOLERATION,
    config_hash,
    engine_affinity,
    labels,
    object_metadata,
    split_image,
)
from function.claim.spec import LLMSpec, P, SpecError
from function.keys import CACHE, RUNTIME, SCALER
from function.kube import dig
from function.outcome import Outcome, observed_manifest
from function.plan import storage
from function.policy import engine_args, ownership
from function.policy.engine import planned_max_model_len, vllm_args

# Ready means serving: at least one engine replica passed its /health readiness probe.
RUNTIME_READY_CEL = "has(object.status.availableReplicas) && object.status.availableReplicas >= 1"


def vllm_runtime(
    *,
    name: str,
    namespace: str,
    model: str,
    image: str,
    gpus: int,
    cpu: str,
    memory: str,
    shm_size: str,
    dtype: str,
    gpu_memory_utilization: float,
    max_model_len: int | None,
    tool_call_parser: str | None,
    enable_prefix_caching: bool,
    enable_chunked_prefill: bool,
    extra_args: Sequence[str],
    env: Sequence[tuple[str, str]],
    engine_secret: tuple[str, str] | None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    cache: tuple[str, str | None] | None = None,
    cache_access_mode: str = "ReadWriteOnce",
    replicas: int | None = 1,
    runtime_class: str | None = None,
    lmcache_config: Mapping[str, Any] | None = None,
    tensor_parallel: int | None = None,
    pull_secret: str | None = None,
    model_url: str | None = None,
) -> dict[str, Any]:
    """A production-stack `VLLMRuntime` (one replica), shaped for the controller at the
    pinned commit (operator/internal/controller/vllmruntime_controller.go):

    - `nodeSelectorTerms` is always set: its update check dereferences the pod's node
      affinity and panics without it (then it never writes status);
    - it rolls the Deployment out only for changes of the model, port, image, resources,
      node affinity, tolerations, runtime class, `/dev/shm` or pod annotations, never of the
      other arguments or variables: a pod annotation carries a digest of the whole spec, so
      every change rolls out;
    - the labels never change (`labels`);
    - `cache` (size, storage class) mounts the model cache claim, named after the runtime as
      the controller expects, at /data; the size must be the claim's current size (the
      controller rewrites the claim when they differ, which the API server refuses). None
      (no `storageConfig`) until that claim exists: the controller would make its own;
    - `replicas` 0 while the model downloads: the Deployment exists, no pod starts; None
      when KEDA owns the count (autoscaling): the field is left out, so the apply never
      takes it back from the autoscaler (`omit_replicas`);
    - `runtime_class`: the cluster's RuntimeClass for GPU pods (None: the CRD's default,
      `nvidia`, which the NVIDIA GPU Operator creates);
    - `lmcache_config`: `spec.lmCacheConfig` (function/backends/lmcache.py); left out when
      None (the CRD's default is `enabled: false`);
    - `engine_secret` (name, key): the one Secret the controller gives the engine, as the
      variable `ENGINE_SECRET_ENV` (`model.hfTokenSecret`): the Hugging Face token, or vLLM's
      API key when the claim sets one (the download Job fetched the weights then);
    - `model_url`: what vLLM loads when it is not `model` (weights copied from the claim's
      source into the cache: function/backends/weights.py);
    - `pull_secret`: the one registry credential the CRD carries (`image.pullSecretName`),
      which the controller gives the pod as its `imagePullSecrets`.
    """
    registry, image_name = split_image(image)
    model_spec: dict[str, Any] = {"modelURL": model_url or model, "dtype": dtype}
    if max_model_len:
        model_spec["maxModelLen"] = max_model_len
    if tool_call_parser:
        model_spec["enableTool"] = True
        model_spec["toolCallParser"] = tool_call_parser
    if engine_secret:
        model_spec["hfTokenSecret"] = {
            "hfTokenSecretName": engine_secret[0],
            "hfTokenKeyName": engine_secret[1],
        }
    vllm_config: dict[str, Any] = {
        # The operator sets VLLM_USE_V1=0 unless v1 is true; vLLM's V0 engine is gone.
        "v1": True,
        "port": ENGINE_PORT,
        "gpuMemoryUtilization": f"{gpu_memory_utilization:g}",
        # The operator passes --no-enable-* when these are false: state them explicitly.
        "enablePrefixCaching": enable_prefix_caching,
        "enableChunkedPrefill": enable_chunked_prefill,
    }
    # The pod's GPUs are one tensor parallel group, or (a mixture of experts) data parallel
    # ranks of `tensor_parallel` GPUs each, whose flags are in the arguments
    # (function/policy/parallel_args.py).
    tp = gpus if tensor_parallel is None else tensor_parallel
    if tp > 1:
        vllm_config["tensorParallelSize"] = tp
    if extra_args:
        vllm_config["extraArgs"] = list(extra_args)
    # The engine's caches are on the claim's mount path, whether or not it is mounted yet.
    env = [*CACHE_ENV, *env]
    if env:
        vllm_config["env"] = [{"name": k, "value": v} for k, v in env]
    deployment: dict[str, Any] = {
        **({"replicas": replicas} if replicas is not None else {}),
        # A rolling update needs a second set of GPUs that a GPU pool rarely has free.
        "deploymentStrategy": "Recreate",
        "image": {
            "registry": registry,
            "name": image_name,
            **({"pullSecretName": pull_secret} if pull_secret else {}),
        },
        "resources": {"cpu": cpu, "memory": memory, "gpu": str(gpus)},
        "shmSize": shm_size,
        "toleration": [dict(t) for t in (tolerations or [GPU_TOLERATION])],
    }
    deployment["nodeSelectorTerms"] = engine_affinity(node_selector)
    if runtime_class:
        deployment["runtimeClass"] = runtime_class
    spec: dict[str, Any] = {
        "model": model_spec,
        "vllmConfig": vllm_config,
        "deploymentConfig": deployment,
    }
    if lmcache_config is not None:
        spec["lmCacheConfig"] = dict(lmcache_config)
    if cache:
        storage = {
            "enabled": True,
            "size": cache[0],
            # The CRD defaults to ReadWriteMany, which most clouds' block storage cannot bind:
            # always stated (function/plan/storage.py `one_claim_layout` picks it).
            "accessMode": cache_access_mode,
            "mountPath": CACHE_MOUNT,
        }
        if cache[1]:
            storage["storageClassName"] = cache[1]
        spec["storageConfig"] = storage
    deployment["podAnnotations"] = {CONFIG_HASH_ANNOTATION: config_hash(spec)}
    return {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "metadata": object_metadata(name, namespace, model),
        "spec": spec,
    }


def engine_command(runtime: Mapping[str, Any]) -> list[str]:
    """The `vllm serve` command line the operator builds from a VLLMRuntime (same order as
    its controller), for status: what will actually run."""
    spec = runtime["spec"]
    model, cfg = spec["model"], spec["vllmConfig"]
    args = ["vllm", "serve", model["modelURL"], "--host", "0.0.0.0", "--port", str(cfg["port"])]
    if model.get("enableTool"):
        args.append("--enable-auto-tool-choice")
    if model.get("toolCallParser"):
        args += ["--tool-call-parser", model["toolCallParser"]]
    args.append(
        "--enable-chunked-prefill"
        if cfg.get("enableChunkedPrefill")
        else "--no-enable-chunked-prefill"
    )
    args.append(
        "--enable-prefix-caching"
        if cfg.get("enablePrefixCaching")
        else "--no-enable-prefix-caching"
    )
    if model.get("maxModelLen"):
        args += ["--max-model-len", str(model["maxModelLen"])]
    if model.get("dtype"):
        args += ["--dtype", model["dtype"]]
    if cfg.get("tensorParallelSize"):
        args += ["--tensor-parallel-size", str(cfg["tensorParallelSize"])]
    if cfg.get("gpuMemoryUtilization"):
        args += ["--gpu_memory_utilization", cfg["gpuMemoryUtilization"]]
    args += list(cfg.get("extraArgs", []))
    if dig(spec, "lmCacheConfig", "enabled") is True and cfg.get("v1"):
        args += [KV_TRANSFER_FLAG, KV_TRANSFER_CONFIG]  # the operator appends it last
    return args


def what_the_runtime_cannot_carry(spec: LLMSpec) -> None:
    """engine settings the VLLMRuntime CRD at the pin has no field for (schemas/production-
    stack): `vllmConfig.env` items are name and value only, and `image.pullSecretName` is
    one Secret. Refused, naming the field, rather than dropped."""
    e = f"{P}.engine"
    if spec.engine.secret_env:
        i, var, _ = spec.engine.secret_env[0]
        raise SpecError(
            f"{e}.env[{i}].valueFrom",
            var,
            f"{e}.env[{i}].valueFrom: the production-stack operator's VLLMRuntime (pinned in "
            "kcl/versions.k) takes variables as name and value only (vllmConfig.env), so a "
            f"Secret cannot reach its engine. {var} from a Secret runs with {P}.backend: llmd "
            "or on a replica over several nodes; here, only a literal value",
        )
    if len(spec.engine.image_pull_secrets) > 1:
        raise SpecError(
            f"{e}.imagePullSecrets",
            list(spec.engine.image_pull_secrets),
            f"{e}.imagePullSecrets: the production-stack operator's VLLMRuntime carries one "
            f"pull Secret (deploymentConfig.image.pullSecretName), not "
            f"{len(spec.engine.image_pull_secrets)}; put the registries' credentials in one "
            "Secret of type kubernetes.io/dockerconfigjson (its auths hold several)",
        )


def build_production_stack(job: Build, out: Outcome) -> Engine:
    """Compose everything for vLLM; the Engine says whether the model is in the cache (until
    then the runtime has no replica, or the engine that serves now is kept while the new
    model downloads)."""
    spec, target, facts, plan = job.spec, job.target, job.facts, job.plan
    image, count, inputs = job.image, job.count, job.inputs
    name = kube.dns_label(spec.name)
    remote = target.provider_config is not None
    what_the_runtime_cannot_carry(spec)
    own_namespace(spec, target, out)
    secrets = copy_secrets(spec, facts, target, name, inputs, out)
    layout = cache_layout(spec, target, count, inputs)
    cache, claim_gib = cache_plan(spec, target, facts, plan, inputs, layout)
    class_name = layout.class_name
    fill = weights.fill_for(spec, image, ENGINE_PYTHON, secrets, inputs)
    fetch = fetch_job(spec, target, name, fill, inputs)
    observed_runtime = inputs.observed.get(RUNTIME + target.suffix)
    started = dig(
        observed_manifest(observed_runtime, remote), "spec", "deploymentConfig", "replicas"
    )
    # An engine that already started keeps serving its model until the new one is cached.
    holding = not fetch.done and isinstance(started, int) and started >= 1
    # The runtime's storage only once our claim exists. With storage on and no claim of the
    # runtime's name, the operator makes one with the runtime as its controller
    # (`pvcForVLLMRuntime`, vllmruntime_controller.go at the pin), which Crossplane can then
    # never own (an object has one controller) and provider-kubernetes finds foreign: the
    # runtime and the claim are applied in one pass, in no set order, so it is a race.
    observed_claim = inputs.observed.get(CACHE + target.suffix)
    claimed = inputs.standalone or (
        ownership.made(observed_claim, ownership.owner(spec.namespace, spec.name))
        if remote
        else observed_claim is not None
    )
    # Applied alone, the engine downloads the weights itself (vLLM's own download, into
    # HF_HOME on the claim). Offline behind an API key it cannot: the Job downloads, and the
    # engine restarts until the weights are there. Weights from a source always come by Job.
    engine_downloads = inputs.standalone and spec.api_key_secret is None and spec.source is None
    cached = fetch.done or inputs.standalone
    env = list(plan.env) + list(spec.engine.env)
    if spec.api_key_secret is not None or (spec.source is not None and not spec.adapters):
        # The engine's one Secret-sourced variable then holds the API key, not the Hugging
        # Face token: the weights are in the cache (the download Job used the token), so the
        # engine stays offline. Weights from a source need no Hub either (an air-gapped
        # cluster has none), unless adapters come from it.
        env.append(("HF_HUB_OFFLINE", "1"))
    offload = lmcache(spec, facts, plan, target)
    if offload is not None:
        env += offload.env
    runtime = vllm_runtime(
        name=name,
        namespace=target.namespace,
        model=spec.model,
        model_url=weights.engine_model(spec),
        image=image,
        gpus=plan.gpus,
        tensor_parallel=plan.tensor_parallel_size,
        cpu=plan.cpu,
        # LMCache's CPU buffer is pinned memory in the engine's processes: the pod grows by it.
        memory=offload.memory if offload else plan.memory,
        shm_size=plan.shm_size,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        max_model_len=planned_max_model_len(spec, plan, out),
        tool_call_parser=facts.tool_call_parser if facts else None,
        enable_prefix_caching=plan.enable_prefix_caching,
        enable_chunked_prefill=plan.enable_chunked_prefill,
        extra_args=vllm_args(spec, facts, plan, out),
        env=env,
        engine_secret=secrets.api_key if spec.api_key_secret is not None else secrets.hf_token,
        node_selector=target.node_selector,
        tolerations=target.tolerations or None,
        # The claim's size as it is now: the controller rewrites a claim whose size differs.
        cache=(storage.quantity(claim_gib or cache.size_gib), class_name) if claimed else None,
        cache_access_mode=layout.access_mode,
        # No pod until the weights are in the cache; then the fixed count, or none written
        # when KEDA owns it.
        replicas=0 if not (cached and claimed) else (None if count.autoscaled else count.low),
        runtime_class=target.runtime_class,
        lmcache_config=offload.config if offload else None,
        pull_secret=secrets.pull[0] if secrets.pull else None,
    )
    place_cache(
        spec,
        target,
        CACHE,
        "model-cache",
        name,
        fill,
        cache,
        layout,
        None if engine_downloads else fetch,
        out,
        # A running engine holds a ReadWriteOnce claim on its node: the Job goes there.
        colocate=holding and layout.access_mode == storage.READ_WRITE_ONCE,
    )
    hold_or_place(
        spec,
        target,
        RUNTIME,
        runtime,
        out,
        holding=holding,
        observed=observed_runtime,
        autoscaled=count.autoscaled,
        suffix="runtime",
        readiness_cel=RUNTIME_READY_CEL,
        watch=True,
    )
    observed_scaler = inputs.observed.get(SCALER + target.suffix)
    if count.autoscaled and cached:
        # KEDA takes over once the model is cached (the runtime then has replicas to scale).
        scaler(spec, target, name, count, RUNTIME_SCALE_TARGET | {"name": name}, out)
    elif count.autoscaled and holding and observed_scaler is not None:
        # The engine kept serving while the new model downloads stays under KEDA.
        out.resources[SCALER + target.suffix] = kube.desired_from_observed(observed_scaler)
    tail(spec, target, count, inputs, out, by_key=RUNTIME, ingress_to=name)
    cache_condition(spec, target, name, cache, class_name, fetch, holding, out)
    out.status_extra["cache"] = {
        "claim": name,
        "size": storage.quantity(cache.size_gib),
        **({"storageClass": class_name} if class_name else {}),
        **layout.status(cache.size_gib),
        **({} if engine_downloads else {"downloadJob": fetch.job}),
        "downloadDeadlineSeconds": cache.download_deadline_s,
        "loadMiBps": cache.load_rate_mib_s,
        "startSeconds": cache.start_s,
        "startupBudgetSeconds": cache.startup_budget_s,
    }
    if offload is not None:
        out.status_extra["kvCache"] = offload.status
        out.status_extra["memory"] = offload.memory
    given = engine_args.last_value(
        runtime["spec"]["vllmConfig"].get("extraArgs", []), engine_args.MAX_MODEL_LEN
    )
    return Engine(
        kind="VLLMRuntime",
        name=name,
        key=RUNTIME,
        command=engine_command(runtime),
        image=image,
        max_model_len=runtime["spec"]["model"].get("maxModelLen")
        or ("auto" if given == "auto" else None),
        current=fetch.done,
        simulated=False,
        pods=labels(name),
    )


BACKEND = Backend(
    name="productionStack", serves=lambda spec, plan: True, build=build_production_stack
)
