"""What the pinned production-stack controller does with a VLLMRuntime, modelled in Python.

Read from `operator/internal/controller/vllmruntime_controller.go` of vllm-project/production-
stack at the commit kcl/versions.k pins (217fadb, controller-runtime 0.20.4, k8s.io/api and
apimachinery 0.33.0), so tests can hold what the function renders against what that
controller will really do. Modelled, function by function:

- `deployment_for`: `deploymentForVLLMRuntime` (labels, args, env, resources, volumes,
  affinity, runtime class, pod annotations), after the API server applied the CRD's defaults.
- `deployment_needs_update`: `deploymentNeedsUpdate`, the only trigger for updating the
  Deployment. It compares replicas, the first argument (model URL), the port, the image,
  resources, the LMCache variables, node affinity, tolerations, the runtime class, the pod
  annotations the VLLMRuntime sets and the `dshm` volume, nothing else: a change of any
  other argument or variable is never rolled out. It dereferences the Deployment's
  `spec.template.spec.affinity` unconditionally: without `nodeSelectorTerms` that is a nil
  pointer and the controller panics (`ControllerPanic`), so status is never written.
- `update_deployment`: the controller's `r.Update` with a freshly built Deployment: the API
  server refuses a changed `spec.selector` (immutable), and the selector is the pod labels,
  which include every label of the VLLMRuntime.
- `status_for`: `updateStatus`, the only status the controller writes (Go `omitempty`: a
  zero count is absent).
- `service_for`, `pvc_for`: `serviceForVLLMRuntime` and `pvcForVLLMRuntime`, the Service every
  VLLMRuntime gets and the claim `storageConfig.enabled` gets when none of its name exists
  (each created before the Deployment; docs/operator-comparison.md).
- `pvc_needs_update`: `pvcNeedsUpdate` compares `storageConfig.size` with the claim's size
  as the API server prints it (canonical form).

Quantities: `resource.MustParse` caches the string only when it is already canonical, and
`reflect.DeepEqual` compares that cache, so a quantity written in a non-canonical form
("4000m", "0.5", "1.5Gi") never equals the canonical one the API server stores and the
controller updates the Deployment on every reconcile, forever (`canonical_quantity` models
apimachinery's `CanonicalizeBytes` for the forms used here).
"""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

from dot_inference.apiserver import defaulted

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


class ControllerPanic(Exception):
    """The controller would panic (a nil pointer dereference in Go)."""


class UpdateRejected(Exception):
    """The API server would reject the controller's update."""


# --------------------------------------------------------------------------- quantities

_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}


def parse_quantity(text: str) -> tuple[Fraction, bool]:
    """(value, binary) of a Kubernetes quantity (no exponent forms); ValueError if invalid,
    as resource.MustParse would panic."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"quantity {text!r}")
    suffix = next((s for s in _BINARY if text.endswith(s)), None)
    if suffix is None:
        suffix = text[-1] if text[-1] in _DECIMAL and not text[-1].isdigit() else ""
    number = text[: len(text) - len(suffix)]
    if not number or number.count(".") > 1 or not number.replace(".", "").isdigit():
        raise ValueError(f"quantity {text!r}")
    value = Fraction(number)
    if suffix in _BINARY:
        return value * 1024 ** _BINARY[suffix], True
    return value * Fraction(10) ** _DECIMAL[suffix], False


def canonical_quantity(text: str) -> str:
    """The string the API server stores for `text` (apimachinery CanonicalizeBytes)."""
    value, binary = parse_quantity(text)
    if value == 0:
        return "0"
    if binary and value >= 1024 and value.denominator == 1:
        amount, exp = int(value), 0
        while amount % 1024 == 0 and exp < 6:
            amount, exp = amount // 1024, exp + 1
        return f"{amount}{['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][exp]}"
    # Decimal: the smallest exponent that is a multiple of 3 and keeps an integer mantissa
    # no finer than nano; trailing zeros move into the exponent.
    exp = -9
    while (value / Fraction(10) ** exp).denominator != 1:
        exp += 3  # not reached for the values written here (whole milli units)
    mantissa = int(value / Fraction(10) ** exp)
    while mantissa % 1000 == 0 and exp < 18:
        mantissa, exp = mantissa // 1000, exp + 3
    suffix = {v: k for k, v in _DECIMAL.items()}[exp]
    return f"{mantissa}{suffix}"


# --------------------------------------------------------------------------- deployment


def with_crd_defaults(runtime: dict[str, Any]) -> dict[str, Any]:
    """The VLLMRuntime as the API server stores it: the pinned CRD's defaults applied."""
    return defaulted(runtime, schema_paths=[SCHEMAS / "production-stack"])


def _dig(obj: Any, *path: str, default: Any = None) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return default
        obj = obj[key]
    return obj


def _resources(res: dict[str, Any]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"requests": {}, "limits": {}}
    pairs = [("cpu", res.get("cpu")), ("memory", res.get("memory"))]
    if res.get("gpu"):
        pairs.append((res.get("gpuType") or "nvidia.com/gpu", res["gpu"]))
    for name, value in pairs:
        if value:
            parse_quantity(value)  # MustParse panics on a bad quantity
            out["requests"][name] = value
            out["limits"][name] = value
    return out


def _args(spec: dict[str, Any]) -> list[str]:
    model, cfg = spec["model"], spec["vllmConfig"]
    args = [model["modelURL"], "--host", "0.0.0.0", "--port", str(cfg["port"])]
    if model.get("enableLoRA"):
        args.append("--enable-lora")
    if model.get("enableTool"):
        args.append("--enable-auto-tool-choice")
    if model.get("toolCallParser"):
        args += ["--tool-call-parser", model["toolCallParser"]]
    for field, flag in (
        ("enableChunkedPrefill", "enable-chunked-prefill"),
        ("enablePrefixCaching", "enable-prefix-caching"),
    ):
        args.append(f"--{flag}" if cfg.get(field) else f"--no-{flag}")
    if model.get("maxModelLen", 0) > 0:
        args += ["--max-model-len", str(model["maxModelLen"])]
    if model.get("dtype"):
        args += ["--dtype", model["dtype"]]
    if cfg.get("tensorParallelSize", 0) > 0:
        args += ["--tensor-parallel-size", str(cfg["tensorParallelSize"])]
    if model.get("maxNumSeqs", 0) > 0:
        args += ["--max-num-seqs", str(model["maxNumSeqs"])]
    if cfg.get("gpuMemoryUtilization"):
        args += ["--gpu_memory_utilization", cfg["gpuMemoryUtilization"]]
    if cfg.get("maxLoras", 0) > 0:
        args += ["--max_loras", str(cfg["maxLoras"])]
    args += list(cfg.get("extraArgs") or [])
    if model.get("chatTemplate"):
        args += ["--chat-template", "/etc/chat-template.json"]
    if _dig(spec, "lmCacheConfig", "enabled"):
        # Appended after the chat template, while the LMCache variables are added.
        connector = "LMCacheConnectorV1" if cfg.get("v1") else "LMCacheConnector"
        args += ["--kv-transfer-config", f'{{"kv_connector":"{connector}","kv_role":"kv_both"}}']
    return args


def _env(spec: dict[str, Any]) -> list[dict[str, Any]]:
    cfg, model = spec["vllmConfig"], spec["model"]
    env: list[dict[str, Any]] = [{"name": "VLLM_USE_V1", "value": "1" if cfg.get("v1") else "0"}]
    if model.get("enableLoRA"):
        env.append({"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"})
    lmcache = spec.get("lmCacheConfig") or {}
    if lmcache.get("enabled"):
        env += [
            {"name": "LMCACHE_LOG_LEVEL", "value": "DEBUG"},
            {"name": "LMCACHE_USE_EXPERIMENTAL", "value": "True"},
            {"name": "VLLM_RPC_TIMEOUT", "value": "1000000"},
        ]
        if lmcache.get("cpuOffloadingBufferSize"):
            env += [
                {"name": "LMCACHE_LOCAL_CPU", "value": "True"},
                {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "value": lmcache["cpuOffloadingBufferSize"]},
            ]
        if lmcache.get("diskOffloadingBufferSize"):
            env += [
                {"name": "LMCACHE_LOCAL_DISK", "value": "True"},
                {
                    "name": "LMCACHE_MAX_LOCAL_DISK_SIZE",
                    "value": lmcache["diskOffloadingBufferSize"],
                },
            ]
        if lmcache.get("remoteUrl"):
            env += [
                {"name": "LMCACHE_REMOTE_URL", "value": lmcache["remoteUrl"]},
                {"name": "LMCACHE_REMOTE_SERDE", "value": lmcache.get("remoteSerde", "")},
            ]
    env += [{"name": e["name"], "value": e["value"]} for e in cfg.get("env") or []]
    token = _dig(model, "hfTokenSecret", "hfTokenSecretName", default="")
    if token:
        env.append(
            {
                "name": "HF_TOKEN",
                "valueFrom": {
                    "secretKeyRef": {
                        "name": token,
                        "key": _dig(model, "hfTokenSecret", "hfTokenKeyName", default=""),
                    }
                },
            }
        )
    return env


def _volumes(name: str, spec: dict[str, Any]) -> tuple[list[dict], list[dict]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    storage = spec.get("storageConfig") or {}
    if storage.get("enabled"):
        vol = storage.get("volumeName") or "pvc-storage"
        volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": name}})
        mounts.append({"name": vol, "mountPath": storage.get("mountPath") or "/data"})
    if spec["model"].get("chatTemplate"):
        volumes.append(
            {
                "name": "chat-template",
                "configMap": {
                    "name": f"{name}-chat-template",
                    "items": [{"key": "chatTemplate", "path": "chat_template.json"}],
                },
            }
        )
        mounts.append(
            {
                "name": "chat-template",
                "mountPath": "/etc/chat-template.json",
                "subPath": "chat_template.json",
            }
        )
    shm = spec["deploymentConfig"].get("shmSize")
    if shm:
        empty: dict[str, Any] = {"medium": "Memory"}
        try:
            parse_quantity(shm)
            empty["sizeLimit"] = shm
        except ValueError:
            pass  # the controller logs and mounts /dev/shm without a limit
        volumes.append({"name": "dshm", "emptyDir": empty})
        mounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    return volumes, mounts


def deployment_for(runtime: dict[str, Any]) -> dict[str, Any]:
    """The Deployment the controller creates for `runtime` (as stored, so after the CRD's
    defaults)."""
    vr = with_crd_defaults(runtime)
    name, namespace = vr["metadata"]["name"], vr["metadata"]["namespace"]
    spec = vr["spec"]
    dc = spec["deploymentConfig"]
    port = spec["vllmConfig"]["port"]
    labels = {"app": name, **(vr["metadata"].get("labels") or {})}
    volumes, mounts = _volumes(name, spec)
    probe = {"httpGet": {"path": "/health", "port": port, "scheme": "HTTP"}, "periodSeconds": 20}
    container: dict[str, Any] = {
        "name": "vllm",
        "image": f"{dc['image']['registry']}/{dc['image']['name']}",
        "imagePullPolicy": dc["image"].get("pullPolicy") or "IfNotPresent",
        "command": ["/opt/venv/bin/vllm", "serve"],
        "args": _args(spec),
        "env": _env(spec),
        "ports": [{"name": "http", "containerPort": port}],
        "resources": _resources(dc.get("resources") or {}),
        "readinessProbe": {
            **probe,
            "initialDelaySeconds": 10,
            "timeoutSeconds": 5,
            "successThreshold": 1,
            "failureThreshold": 10,
        },
        "livenessProbe": {
            **probe,
            "initialDelaySeconds": 10,
            "timeoutSeconds": 3,
            "successThreshold": 1,
            "failureThreshold": 10,
        },
        "startupProbe": {
            **probe,
            "initialDelaySeconds": 120,
            "timeoutSeconds": 3,
            "failureThreshold": 100,
        },
    }
    if mounts:
        container["volumeMounts"] = mounts
    pod_spec: dict[str, Any] = {
        # A pointer to the field's value: always set, "" included (CRD default "nvidia").
        "runtimeClassName": dc.get("runtimeClass", ""),
        "containers": [container],
    }
    if "nodeSelectorTerms" in dc:  # Go: a nil slice when absent
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": dc["nodeSelectorTerms"]
                }
            }
        }
    if dc.get("toleration"):
        pod_spec["tolerations"] = dc["toleration"]
    if _dig(dc, "image", "pullSecretName"):
        pod_spec["imagePullSecrets"] = [{"name": dc["image"]["pullSecretName"]}]
    if volumes:
        pod_spec["volumes"] = volumes
    template: dict[str, Any] = {"metadata": {"labels": labels}, "spec": pod_spec}
    if dc.get("podAnnotations"):
        template["metadata"]["annotations"] = dict(dc["podAnnotations"])
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": dc.get("replicas", 1),
            "strategy": {"type": dc.get("deploymentStrategy") or "RollingUpdate"},
            "selector": {"matchLabels": labels},
            "template": template,
        },
    }


def service_for(runtime: dict[str, Any]) -> dict[str, Any]:
    """`serviceForVLLMRuntime`: the Service the controller creates for every VLLMRuntime (port
    80 to the engine's port, selecting the pods by the Deployment's labels)."""
    vr = with_crd_defaults(runtime)
    name, namespace = vr["metadata"]["name"], vr["metadata"]["namespace"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": name, **(vr["metadata"].get("labels") or {})},
            "ports": [
                {
                    "name": "http",
                    "port": 80,
                    "targetPort": vr["spec"]["vllmConfig"]["port"],
                    "protocol": "TCP",
                }
            ],
        },
    }


def pvc_for(runtime: dict[str, Any]) -> dict[str, Any] | None:
    """`pvcForVLLMRuntime`: the claim the controller creates, named after the runtime, when
    `storageConfig.enabled` and none of that name exists (None when storage is off)."""
    vr = with_crd_defaults(runtime)
    storage = vr["spec"].get("storageConfig") or {}
    if not storage.get("enabled"):
        return None
    name, namespace = vr["metadata"]["name"], vr["metadata"]["namespace"]
    access = storage.get("accessMode")
    claim: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": name, **(vr["metadata"].get("labels") or {})},
        },
        "spec": {
            "accessModes": [
                access
                if access in ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany")
                else "ReadWriteOnce"
            ],
            "resources": {"requests": {"storage": storage.get("size") or "10Gi"}},
        },
    }
    if storage.get("storageClassName"):
        claim["spec"]["storageClassName"] = storage["storageClassName"]
    return claim


def _stored(deployment: dict[str, Any]) -> dict[str, Any]:
    """The Deployment as the API server returns it: quantities in canonical form."""
    out = copy.deepcopy(deployment)
    for container in out["spec"]["template"]["spec"]["containers"]:
        for kind in ("requests", "limits"):
            q = container["resources"][kind]
            for k in q:
                q[k] = canonical_quantity(q[k])
    for vol in out["spec"]["template"]["spec"].get("volumes", []):
        if "sizeLimit" in vol.get("emptyDir", {}):
            vol["emptyDir"]["sizeLimit"] = canonical_quantity(vol["emptyDir"]["sizeLimit"])
    return out


def created(runtime: dict[str, Any]) -> dict[str, Any]:
    """The Deployment the controller creates for `runtime`, as stored."""
    return _stored(deployment_for(runtime))


def _named(items: list[dict[str, Any]] | None, name: str) -> dict[str, Any] | None:
    return next((i for i in items or [] if i.get("name") == name), None)


def deployment_needs_update(found: dict[str, Any], runtime: dict[str, Any]) -> bool:
    """`deploymentNeedsUpdate(found, runtime)`; ControllerPanic where Go would panic."""
    expected = deployment_for(runtime)
    vr = with_crd_defaults(runtime)
    f_pod, e_pod = found["spec"]["template"], expected["spec"]["template"]
    f_c, e_c = f_pod["spec"]["containers"][0], e_pod["spec"]["containers"][0]
    if found["spec"]["replicas"] != vr["spec"]["deploymentConfig"].get("replicas", 1):
        return True
    if (f_c["args"][:1] or [""])[0] != vr["spec"]["model"]["modelURL"]:
        return True
    if f_c["ports"][0]["containerPort"] != vr["spec"]["vllmConfig"]["port"]:
        return True
    if f_c["image"] != e_c["image"]:
        return True
    # reflect.DeepEqual on parsed quantities: equal only for identical strings here
    if f_c["resources"] != e_c["resources"]:
        return True
    lmcache = ("LMCACHE_USE_EXPERIMENTAL", "LMCACHE_MAX_LOCAL_CPU_SIZE")
    if [e for e in f_c.get("env", []) if e["name"] in lmcache] != [
        e for e in e_c.get("env", []) if e["name"] in lmcache
    ]:
        return True
    for pod in (f_pod, e_pod):
        if "affinity" not in pod["spec"]:
            raise ControllerPanic(
                "deploymentNeedsUpdate dereferences spec.template.spec.affinity.nodeAffinity: "
                "nil pointer without deploymentConfig.nodeSelectorTerms"
            )
    if f_pod["spec"]["affinity"] != e_pod["spec"]["affinity"]:
        return True
    if f_pod["spec"].get("tolerations") != e_pod["spec"].get("tolerations"):
        return True
    if f_pod["spec"]["runtimeClassName"] != e_pod["spec"]["runtimeClassName"]:
        return True
    actual = f_pod["metadata"].get("annotations") or {}
    if any(actual.get(k) != v for k, v in (e_pod["metadata"].get("annotations") or {}).items()):
        return True
    if _named(f_pod["spec"].get("volumes"), "dshm") != _named(e_pod["spec"].get("volumes"), "dshm"):
        return True
    return _named(f_c.get("volumeMounts"), "dshm") != _named(e_c.get("volumeMounts"), "dshm")


def reconcile(found: dict[str, Any] | None, runtime: dict[str, Any]) -> dict[str, Any]:
    """The Deployment after one reconcile of `runtime`: created when absent, replaced when
    deploymentNeedsUpdate says so (UpdateRejected for an immutable selector change)."""
    if found is None:
        return created(runtime)
    if not deployment_needs_update(found, runtime):
        return found
    new = created(runtime)
    if new["spec"]["selector"] != found["spec"]["selector"]:
        raise UpdateRejected(
            'Deployment.apps "'
            + found["metadata"]["name"]
            + '" is invalid: spec.selector: Invalid value: field is immutable'
        )
    return new


def status_for(
    available: int, replicas: int = 1, updated: int | None = None, unavailable: int = 0
) -> dict[str, Any]:
    """`updateStatus`: the status the controller writes from its Deployment's status
    (int32 fields with `omitempty`: zero is absent)."""
    updated = replicas if updated is None else updated
    if available == replicas and unavailable == 0:
        model_status = "Ready"
    elif updated > 0 and available != replicas and unavailable > 0:
        model_status = "Updating"
    elif unavailable > 0:
        model_status = "NotReady"
    else:
        model_status = "Unknown"
    status: dict[str, Any] = {"modelStatus": model_status, "lastUpdated": "2026-11-24T00:00:00Z"}
    for key, value in (
        ("replicas", replicas),
        ("availableReplicas", available),
        ("updatedReplicas", updated),
        ("unavailableReplicas", unavailable),
    ):
        if value:
            status[key] = value
    status["selector"] = "app=placeholder"
    return status


def pvc_needs_update(claim_size: str, runtime: dict[str, Any]) -> bool:
    """`pvcNeedsUpdate`: storageConfig.size (default 10Gi) against the claim's stored size.
    Its update rebuilds the claim without volumeName, which the API server refuses for a
    bound claim: a true here is a reconcile error on every pass."""
    vr = with_crd_defaults(runtime)
    expected = _dig(vr, "spec", "storageConfig", "size", default="10Gi") or "10Gi"
    return expected != canonical_quantity(claim_size)
