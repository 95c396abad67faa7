"""The function end to end through its gRPC entry point, table-driven: each case is an XR
(plus observed / required resources) and the parts of the response it must contain."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import engine_image, no_credentials, on_target, request, run
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from function.limits import GPU_TYPES, MAX_GPUS_MULTI_NODE

H200_GIB = GPU_TYPES["h200"].memory_gib

CLUSTER_REQ = "inference-cluster"
SEVERITY = {
    fnv1.SEVERITY_FATAL: "Fatal",
    fnv1.SEVERITY_WARNING: "Warning",
    fnv1.SEVERITY_NORMAL: "Normal",
}
STATUS = {
    fnv1.STATUS_CONDITION_TRUE: "True",
    fnv1.STATUS_CONDITION_FALSE: "False",
    fnv1.STATUS_CONDITION_UNKNOWN: "Unknown",
}
READY = {fnv1.READY_TRUE: True, fnv1.READY_FALSE: False, fnv1.READY_UNSPECIFIED: None}


def xr(name: str = "qwen", **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": "a-team"},
        "spec": {"parameters": params},
    }


def with_models_identity(ready: bool) -> dict[str, Any]:
    """The cluster, its models acting through the scoped ProviderConfig gpus-models."""
    return cluster(
        status__modelsProviderConfig={"name": "gpus-models", "scoped": True, "ready": ready}
    )


def cluster(**overrides: Any) -> dict[str, Any]:
    c = {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "gpus", "namespace": "a-team"},
        "spec": {
            "parameters": {
                "provider": "google",
                "gpu": {"enabled": True},
                "apps": {"vllm": {"enabled": True}},
            }
        },
        "status": {
            "providerConfigName": "gpus",
            "gpu": {
                "enabled": True,
                "type": "h200",
                "memoryGiB": H200_GIB,
                "perNode": 8,
                "maxNodes": 1,
                "instanceType": "a3-ultragpu-8g",
                "allocatable": {"cpuMillicores": 223040, "memoryMiB": 3016000},
                "runtimeClassName": "nvidia",
                "nodeSelector": {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
                "tolerations": [
                    {
                        "key": "nvidia.com/gpu",
                        "operator": "Equal",
                        "value": "present",
                        "effect": "NoSchedule",
                    }
                ],
            },
            "apps": {"nvidia": True, "vllm": True, "ingress": True},
            "vllm": {"namespace": "inference"},
            "ingressClassName": "traefik",
        },
    }
    for path, value in overrides.items():
        obj = c
        *parents, leaf = path.split("__")
        for p in parents:
            obj = obj.setdefault(p, {})
        if value is None:
            obj.pop(leaf, None)
        else:
            obj[leaf] = value
    return c


# A composition resource name without its target suffix (function/cluster/target.py Target.suffix):
# the cases below name resources by what they are, wherever they go.
_TARGET_SUFFIX = re.compile(r"-[0-9a-f]{6}$")


def _base(key: str) -> str:
    return _TARGET_SUFFIX.sub("", key)


def summary(rsp: fnv1.RunFunctionResponse) -> dict[str, Any]:
    results = [(SEVERITY[r.severity], r.message) for r in rsp.results]
    return {
        "resources": {
            _base(k): resource.struct_to_dict(v.resource) for k, v in rsp.desired.resources.items()
        },
        "ready": {_base(k): READY[v.ready] for k, v in rsp.desired.resources.items()},
        "status": resource.struct_to_dict(rsp.desired.composite.resource).get("status", {}),
        "conditions": {c.type: (STATUS[c.status], c.reason, c.message) for c in rsp.conditions},
        "results": results,
        "fatal": next((m for s, m in results if s == "Fatal"), None),
        "requirements": {k: v.match_name for k, v in rsp.requirements.resources.items()},
    }


def contains(expected: Any, actual: Any, path: str = "") -> None:
    """Dicts match partially, lists and tuples element by element (same length), strings
    starting with '~' are substrings, everything else is equal."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected an object, got {actual!r}"
        for k, v in expected.items():
            assert k in actual, f"{path}.{k} missing (have {sorted(actual)})"
            contains(v, actual[k], f"{path}.{k}")
    elif isinstance(expected, str) and expected.startswith("~"):
        assert expected[1:] in str(actual), f"{path}: {expected[1:]!r} not in {actual!r}"
    elif isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        assert len(expected) == len(actual), f"{path}: {actual!r}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            contains(e, a, f"{path}[{i}]")
    else:
        assert actual == expected, f"{path}: expected {expected!r}, got {actual!r}"


# The engine's cache variables (function/backends/resources.py CACHE_ENV), first in its env.
CACHE_ENV = [
    {"name": "HF_HOME", "value": "/data/huggingface"},
    {"name": "VLLM_CACHE_ROOT", "value": "/data/vllm"},
]


def fetch_done(claim: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The observed download Job of `claim`, succeeded (its key carries a digest)."""
    from function.compose import compose
    from function.keys import FETCH
    from function.outcome import Inputs

    out = compose(Inputs(xr=claim, engine_image=engine_image()))
    key = next(k for k in out.resources if k.startswith(FETCH))
    return {key: {"status": {"succeeded": 1}}}


RUNTIME_AVAILABLE = {"status": {"availableReplicas": 1, "modelStatus": "Ready"}}
RUNTIME_LOADING = {
    "status": {"availableReplicas": 0, "unavailableReplicas": 1, "modelStatus": "NotReady"}
}
OBJECT_READY = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
# The Hugging Face token Secret in the claim's namespace, as Crossplane fetches it.
TOKEN_SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "hf-token", "namespace": "a-team"},
    "type": "Opaque",
    "data": {"token": "bm90LWEtdG9rZW4="},
}
# An Object as Crossplane observes it: what the function asked for, plus what the API
# server and the provider wrote.
OBSERVED_OBJECT = {
    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
    "kind": "Object",
    "metadata": {
        "name": "qwen-runtime",
        "namespace": "a-team",
        "labels": {"app.kubernetes.io/part-of": "dot-inference"},
        "annotations": {"crossplane.io/composition-resource-name": "vllm-runtime"},
        "uid": "3f0c2b9e-0000-4000-8000-000000000001",
        "resourceVersion": "123456",
        "generation": 3,
        "creationTimestamp": "2026-11-01T00:00:00Z",
        "ownerReferences": [
            {
                "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
                "kind": "LLMInference",
                "name": "qwen",
                "uid": "3f0c2b9e-0000-4000-8000-000000000002",
            }
        ],
        "finalizers": ["finalizer.managedresource.crossplane.io"],
        "managedFields": [
            {"manager": "apiextensions.crossplane.io/composed", "operation": "Apply"}
        ],
    },
    "spec": {
        "forProvider": {
            "manifest": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a-team"}}
        },
        "providerConfigRef": {"kind": "ProviderConfig", "name": "gpus"},
    },
    "status": {
        "conditions": [{"type": "Ready", "status": "True"}],
        "atProvider": {"manifest": {"status": {"phase": "Active"}}},
    },
}

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "PRD scenario 1: Qwen 1.5B on one GPU with an Ingress",
        {"xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", gpu=1, ingressHost="qwen.127.0.0.1.nip.io")},
        {
            "resources": {
                "vllm-runtime": {
                    "kind": "VLLMRuntime",
                    "metadata": {"name": "qwen", "namespace": "a-team"},
                    "spec": {
                        "model": {
                            "modelURL": "Qwen/Qwen2.5-1.5B-Instruct",
                            "dtype": "auto",
                            "enableTool": True,
                            "toolCallParser": "hermes",
                            "maxModelLen": 32768,
                        },
                        "vllmConfig": {
                            "gpuMemoryUtilization": "0.9",
                            "v1": True,
                            "enablePrefixCaching": True,
                        },
                        "deploymentConfig": {
                            "resources": {"cpu": "4", "memory": "8Gi", "gpu": "1"},
                            "shmSize": "2Gi",
                        },
                    },
                },
                "ingress": {
                    "spec": {
                        "rules": [
                            {
                                "host": "qwen.127.0.0.1.nip.io",
                                "http": {
                                    "paths": [
                                        {
                                            "path": "/",
                                            "pathType": "Prefix",
                                            "backend": {
                                                "service": {"name": "qwen", "port": {"number": 80}}
                                            },
                                        }
                                    ]
                                },
                            }
                        ]
                    }
                },
            },
            "ready": {"vllm-runtime": False, "ingress": False},
            "status": {
                "endpoint": "http://qwen.127.0.0.1.nip.io",
                "plan": {
                    "gpus": 1,
                    "tensorParallelSize": 1,
                    "gpuAssumed": True,
                    "modelSource": "catalog",
                    "fits": True,
                },
            },
            "conditions": {
                "GPUMemory": ("True", "Fits", "~offer 71 GiB"),
                "Serving": ("False", "Downloading", "~starts once the model is in its cache"),
                "ModelCache": ("False", "Downloading", "~PersistentVolumeClaim a-team/qwen"),
            },
            "fatal": None,
        },
    ),
    (
        "PRD scenario 2: embeddings get the pooling runner, one GPU, small host",
        {"xr": xr("embedding", model="BAAI/bge-base-en-v1.5")},
        {
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "model": {"maxModelLen": 512},
                        "vllmConfig": {
                            "extraArgs": [
                                "--served-model-name",
                                "BAAI/bge-base-en-v1.5",
                                "--runner",
                                "pooling",
                            ],
                            "enablePrefixCaching": False,
                            "enableChunkedPrefill": False,
                        },
                        "deploymentConfig": {
                            "resources": {"cpu": "2", "memory": "4Gi", "gpu": "1"}
                        },
                    }
                }
            },
            "status": {
                "endpoint": "http://embedding.a-team.svc.cluster.local",
                "plan": {"task": "embed", "gpus": 1},
            },
        },
    ),
    (
        "PRD scenario 3: Kimi-K2.5 on 8 x 80 GiB does not fit: warning condition with numbers",
        {"xr": xr("kimi", model="moonshotai/Kimi-K2.5", gpu=8)},
        {
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "vllmConfig": {
                            "tensorParallelSize": 8,
                            "env": [
                                *CACHE_ENV,
                                {"name": "VLLM_WORKER_MULTIPROC_METHOD", "value": "spawn"},
                            ],
                            "extraArgs": [
                                "--served-model-name",
                                "moonshotai/Kimi-K2.5",
                                "--trust-remote-code",
                                "--reasoning-parser",
                                "kimi_k2",
                                # A vision-language model: images per prompt bounded.
                                "--limit-mm-per-prompt",
                                '{"image":4}',
                                "--mm-encoder-tp-mode",
                                "data",
                            ],
                        },
                        "model": {"toolCallParser": "kimi_k2", "enableTool": True},
                        "deploymentConfig": {
                            "resources": {"cpu": "16", "memory": "64Gi", "gpu": "8"},
                            "shmSize": "20Gi",
                        },
                    }
                }
            },
            "conditions": {"GPUMemory": ("False", "InsufficientMemory", "~needs about 665 GiB")},
            "status": {"plan": {"fits": False, "requiredGiB": 665.0, "availableGiB": 569.6}},
            "fatal": None,
        },
    ),
    (
        "gpu omitted: the function chooses the smallest count that holds the model",
        {"xr": xr(model="Qwen/Qwen2.5-72B-Instruct")},
        {
            "status": {"plan": {"gpus": 4, "tensorParallelSize": 4}},
            "resources": {"vllm-runtime": {"spec": {"vllmConfig": {"tensorParallelSize": 4}}}},
        },
    ),
    (
        "gpu that does not divide the attention heads is fatal and lists valid counts",
        {"xr": xr(model="Qwen/Qwen2.5-7B-Instruct", gpu=3)},
        {
            "fatal": "~spec.parameters.gpu: 3 does not divide the 28 attention heads",
            "resources": {},
        },
    ),
    (
        "model nobody can size and no gpu: fatal naming the field and the fix",
        {"xr": xr(model="acme/mystery-model")},
        {"fatal": "~set spec.parameters.gpu"},
    ),
    (
        "model nobody can size with gpu: deployed as asked, memory not checked",
        {"xr": xr(model="acme/mystery-model", gpu=2)},
        {
            "conditions": {"GPUMemory": ("Unknown", "NotEstimated", "~not in the catalog")},
            "status": {"plan": {"gpus": 2, "modelSource": "unknown"}},
            "resources": {"vllm-runtime": {"spec": {"vllmConfig": {"tensorParallelSize": 2}}}},
        },
    ),
    (
        "more GPUs than one replica may use (function/limits.yaml): fatal, not a crash",
        {"xr": xr(model="acme/mystery-model", gpu=MAX_GPUS_MULTI_NODE + 1)},
        {
            "fatal": f"~spec.parameters.gpu: {MAX_GPUS_MULTI_NODE + 1} is not a GPU count; use a "
            "whole number"
        },
    ),
    (
        "unknown id with a size in its name is estimated and says so",
        {"xr": xr(model="acme/Coolmodel-14B-Instruct")},
        {"status": {"plan": {"modelSource": "estimated"}}},
    ),
    (
        "gated model gets the default token Secret by reference",
        {"xr": xr(model="meta-llama/Llama-3.1-8B-Instruct")},
        {
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "model": {
                            "hfTokenSecret": {
                                "hfTokenSecretName": "hf-token",
                                "hfTokenKeyName": "token",
                            }
                        }
                    }
                }
            }
        },
    ),
    (
        "explicit token ref is used even for an open model",
        {"xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", hfTokenSecretRef={"name": "hf", "key": "t"})},
        {
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "model": {
                            "hfTokenSecret": {"hfTokenSecretName": "hf", "hfTokenKeyName": "t"}
                        }
                    }
                }
            }
        },
    ),
    (
        "engine escape hatches: image, context, args, env",
        {
            "xr": xr(
                model="Qwen/Qwen2.5-1.5B-Instruct",
                engine={
                    "image": "ghcr.io/me/vllm-openai:custom",
                    "maxModelLen": 8192,
                    "extraArgs": ["--enforce-eager", "--dtype=bfloat16"],
                    "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
                },
            )
        },
        {
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "model": {"maxModelLen": 8192},
                        "vllmConfig": {
                            "extraArgs": [
                                "--served-model-name",
                                "Qwen/Qwen2.5-1.5B-Instruct",
                                "--enforce-eager",
                                "--dtype=bfloat16",
                            ],
                            "env": [*CACHE_ENV, {"name": "HF_HUB_OFFLINE", "value": "1"}],
                        },
                        "deploymentConfig": {
                            "image": {"registry": "ghcr.io", "name": "me/vllm-openai:custom"}
                        },
                    }
                }
            },
            "status": {"plan": {"image": "ghcr.io/me/vllm-openai:custom"}},
            "results": (("Normal", "~overrides --dtype"),),
        },
    ),
    *(
        (
            f"--max-model-len in extraArgs ({spelling}) is what status and the runtime say",
            {"xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", engine={"extraArgs": args})},
            {
                "resources": {"vllm-runtime": {"spec": {"model": {"maxModelLen": 8192}}}},
                "status": {"plan": {"maxModelLen": 8192}},
                "results": (("Normal", "~overrides --max-model-len"),),
            },
        )
        for spelling, args in (
            ("two arguments", ["--max-model-len", "4096", "--max-model-len", "8192"]),
            ("underscores and =", ["--max_model_len=8192"]),
        )
    ),
    (
        "--max-model-len in extraArgs beyond the KV cache: warned, named where it was given",
        {
            "xr": xr(
                model="Qwen/Qwen2.5-7B-Instruct", engine={"extraArgs": ["--max-model-len=999424"]}
            )
        },
        {
            "status": {"plan": {"maxModelLen": 999424}},
            "results": (
                ("Warning", "~spec.parameters.engine.extraArgs --max-model-len: 999424 tokens"),
            ),
        },
    ),
    (
        "a typo of a catalog id: estimated from the name, and asked whether the id was meant",
        {"xr": xr(model="Qwen/Qwen2.5-1.5B-Instrut")},
        {
            "status": {"plan": {"modelSource": "estimated"}},
            "results": (
                (
                    "Warning",
                    "~spec.parameters.model: Qwen/Qwen2.5-1.5B-Instrut is not in the catalog, "
                    "but Qwen/Qwen2.5-1.5B-Instruct is: did you mean it?",
                ),
                ("Warning", "~Qwen/Qwen2.5-1.5B-Instrut is not in the catalog and the Hugging"),
            ),
        },
    ),
    (
        "a typo with no size to estimate from: refused, naming the likely id",
        {"xr": xr(model="deepseek-ai/DeepSeek-V3x")},
        {"fatal": "~or did you mean deepseek-ai/DeepSeek-V3?"},
    ),
    (
        "observed engine with an available replica: ready and serving",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", ingressHost="q.example.com"),
            "observed": {"vllm-runtime": RUNTIME_AVAILABLE, "ingress": {"kind": "Ingress"}},
        },
        {
            "ready": {"vllm-runtime": True, "ingress": True},
            "conditions": {"Serving": ("True", "Available", "~1 replica(s) serving")},
        },
    ),
    (
        "observed engine still loading: not ready, says what it waits for",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct"),
            "observed": {
                "vllm-runtime": RUNTIME_LOADING,
                **fetch_done(xr(model="Qwen/Qwen2.5-1.5B-Instruct")),
            },
        },
        {
            "ready": {"vllm-runtime": False},
            "conditions": {
                "Serving": (
                    "False",
                    "WaitingForEngine",
                    "~0 replica(s) available, model status NotReady",
                )
            },
        },
    ),
    (
        "providerConfigName: everything wrapped in Objects for the other cluster",
        {
            "xr": xr(
                model="meta-llama/Llama-3.1-8B-Instruct",
                ingressHost="l.example.com",
                providerConfigName="gpu-cluster",
                targetNamespace="a-team",
            ),
            # The token, and the namespace's credential Secrets' owners (none here).
            "required": {"secret-hf-token": [TOKEN_SECRET], **no_credentials()},
        },
        {
            "resources": {
                "namespace": {
                    "kind": "Object",
                    "spec": {
                        "managementPolicies": ["Observe", "Create", "Update", "LateInitialize"],
                        "forProvider": {
                            "manifest": {"kind": "Namespace", "metadata": {"name": "a-team"}}
                        },
                    },
                },
                "hf-token": {
                    "kind": "Object",
                    "spec": {
                        "references": [
                            {
                                "patchesFrom": {
                                    "kind": "Secret",
                                    "name": "hf-token",
                                    "namespace": "a-team",
                                    "fieldPath": "data.token",
                                },
                                "toFieldPath": "data.token",
                            }
                        ],
                        "forProvider": {
                            "manifest": {"kind": "Secret", "metadata": {"namespace": "a-team"}}
                        },
                    },
                },
                "vllm-runtime": {
                    "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
                    "kind": "Object",
                    "spec": {
                        "providerConfigRef": {"kind": "ProviderConfig", "name": "gpu-cluster"},
                        "readiness": {"policy": "DeriveFromCelQuery"},
                        "forProvider": {
                            "manifest": {"kind": "VLLMRuntime", "metadata": {"namespace": "a-team"}}
                        },
                    },
                },
                "ingress": {
                    "kind": "Object",
                    "spec": {"forProvider": {"manifest": {"kind": "Ingress"}}},
                },
            },
            "status": {"endpoint": "http://l.example.com"},
        },
    ),
    (
        "remote engine ready through its Object's readiness",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", providerConfigName="pc"),
            "observed": on_target(
                {"vllm-runtime": OBJECT_READY, "namespace": OBJECT_READY}, "pc", "a-team"
            ),
        },
        {
            "ready": {"vllm-runtime": True, "namespace": True},
            "conditions": {"Serving": ("True", "Available", "~serving")},
        },
    ),
    (
        "no engine image anywhere is fatal",
        {"xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct"), "fn_input": {}},
        {"fatal": "~engine.image"},
    ),
    (
        "clusterRef, first call: asks for the cluster and composes nothing yet",
        {"xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"})},
        {
            "requirements": {CLUSTER_REQ: "gpus"},
            "resources": {},
            "fatal": None,
            "conditions": {"Cluster": ("Unknown", "Resolving", "~InferenceCluster a-team/gpus")},
        },
    ),
    (
        "clusterRef, asked and absent: condition, nothing new, observed kept",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: []},
            "observed": {"vllm-runtime": OBSERVED_OBJECT},
        },
        {
            "conditions": {"Cluster": ("False", "NotFound", "~does not exist")},
            "resources": {"vllm-runtime": {"kind": "Object", "spec": OBSERVED_OBJECT["spec"]}},
        },
    ),
    (
        "clusterRef, present: sized for the cluster's GPU, its pool, its ProviderConfig",
        {
            "xr": xr(
                "kimi",
                model="moonshotai/Kimi-K2.5",
                clusterRef={"name": "gpus"},
                ingressHost="k.example.com",
            ),
            "required": {CLUSTER_REQ: [cluster()]},
        },
        {
            "status": {
                "plan": {
                    "gpus": 8,
                    "fits": True,
                    "gpuType": "h200",
                    "gpuAssumed": False,
                    "gpuMemoryGiB": H200_GIB,
                }
            },
            "conditions": {
                "Cluster": ("True", "Found", "~8 x h200"),
                "GPUMemory": ("True", "Fits", "~needs about 665 GiB"),
            },
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "providerConfigRef": {"name": "gpus"},
                        "forProvider": {
                            "manifest": {
                                "spec": {
                                    "deploymentConfig": {
                                        "nodeSelectorTerms": [
                                            {
                                                "matchExpressions": [
                                                    {
                                                        "key": "cloud.google.com/gke-accelerator",
                                                        "operator": "In",
                                                        "values": ["nvidia-h200-141gb"],
                                                    }
                                                ]
                                            }
                                        ],
                                        "toleration": [
                                            {
                                                "key": "nvidia.com/gpu",
                                                "operator": "Equal",
                                                "value": "present",
                                                "effect": "NoSchedule",
                                            }
                                        ],
                                    }
                                }
                            }
                        },
                    }
                },
                "ingress": {
                    "spec": {"forProvider": {"manifest": {"spec": {"ingressClassName": "traefik"}}}}
                },
            },
        },
    ),
    (
        "explicit gpu too small on a known GPU: refused with the GiB needed and what fits",
        {
            "xr": xr(model="Qwen/Qwen2.5-14B-Instruct", gpu=1, clusterRef={"name": "gpus"}),
            "required": {
                CLUSTER_REQ: [
                    cluster(
                        status__gpu__memoryGiB=22.5, status__gpu__type="l4", status__gpu__perNode=4
                    )
                ]
            },
        },
        {
            "fatal": "~spec.parameters.gpu: 1 cannot hold Qwen/Qwen2.5-14B-Instruct on gpus: "
            "Qwen/Qwen2.5-14B-Instruct needs about 35 GiB of GPU memory; 1 x 22.5 GiB GPU at 0.9 "
            "utilisation offers 20 GiB; gpu: 2 would fit",
            "resources": {},
        },
    ),
    (
        "explicit gpu too small for a model estimated from its name: a warning, not a refusal",
        {
            "xr": xr(model="acme/Foo-14B-Instruct", gpu=1, clusterRef={"name": "gpus"}),
            "required": {
                CLUSTER_REQ: [
                    cluster(
                        status__gpu__memoryGiB=22.5, status__gpu__type="l4", status__gpu__perNode=4
                    )
                ]
            },
        },
        {
            "fatal": None,
            "results": (("Warning", "~needs about 28 GiB"), ("Warning", "~estimated")),
            "conditions": {"GPUMemory": ("False", "InsufficientMemory", "~gpu: 2 would fit")},
        },
    ),
    (
        "clusterRef to a cluster without the GPU Operator is refused with the field to enable",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: [cluster(status__gpu__runtimeClassName=None)]},
        },
        {
            "fatal": "~runs no NVIDIA GPU Operator, so its GPU nodes have no device plugin or "
            "RuntimeClass for the engine's pods: set spec.parameters.apps.nvidia.enabled: true",
            "resources": {},
        },
    ),
    (
        "one-GPU node with 4 vCPUs: requests lowered to what the node can give, and said so",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {
                CLUSTER_REQ: [
                    cluster(
                        status__gpu__type="l4",
                        status__gpu__memoryGiB=22.5,
                        status__gpu__perNode=1,
                        status__gpu__instanceType="g6.xlarge",
                        status__gpu__allocatable={"cpuMillicores": 3420, "memoryMiB": 13795},
                    )
                ]
            },
        },
        {
            "resources": {
                "vllm-runtime": {
                    "spec": {
                        "forProvider": {
                            "manifest": {
                                "spec": {
                                    "deploymentConfig": {
                                        "resources": {"cpu": "2900m", "memory": "8Gi", "gpu": "1"},
                                        "runtimeClass": "nvidia",
                                    }
                                }
                            }
                        }
                    }
                }
            },
            "status": {
                "plan": {
                    "cpu": "2900m",
                    "resourcesCapped": "cpu 4 -> 2900m to fit one g6.xlarge of gpus",
                }
            },
            "results": (("Normal", "~engine requests lowered: cpu 4 -> 2900m"),),
        },
    ),
    (
        "clusterRef to a cluster without apps.vllm is refused with the field to enable",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: [cluster(status__apps={"nvidia": True, "vllm": False})]},
        },
        {"fatal": "~set spec.parameters.apps.vllm.enabled: true on InferenceCluster a-team/gpus"},
    ),
    (
        "clusterRef to a cluster still provisioning: waits with a condition",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: [cluster(status=None)]},
        },
        {
            "conditions": {"Cluster": ("False", "NotReady", "~has not published")},
            "fatal": None,
        },
    ),
    (
        "clusterRef to a cluster whose models' identity is not ready: waits, composes nothing",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: [with_models_identity(ready=False)]},
        },
        {
            "conditions": {
                "Cluster": ("False", "NotReady", "~status.modelsProviderConfig.ready: false")
            },
            "resources": {},
            "fatal": None,
        },
    ),
    (
        "clusterRef to a cluster whose models' identity is ready: composed through it",
        {
            "xr": xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: [with_models_identity(ready=True)]},
        },
        {
            "conditions": {"Cluster": ("True", "Found", "~ProviderConfig gpus-models")},
            "fatal": None,
        },
    ),
    (
        "explicit gpu above the cluster's GPUs per node is refused",
        {
            "xr": xr(model="Qwen/Qwen2.5-72B-Instruct", gpu=8, clusterRef={"name": "gpus"}),
            "required": {CLUSTER_REQ: [cluster(status__gpu__perNode=4)]},
        },
        {"fatal": "~more than the 4 GPUs a node has"},
    ),
    (
        "model that fits no node of the cluster is refused with the numbers",
        {
            "xr": xr(model="moonshotai/Kimi-K2.5", clusterRef={"name": "gpus"}),
            "required": {
                CLUSTER_REQ: [cluster(status__gpu__memoryGiB=22.0, status__gpu__type="l4")]
            },
        },
        {"fatal": "~GiB"},
    ),
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_run_function(given: dict[str, Any], expected: dict[str, Any]) -> None:
    rsp = run(
        request(
            given["xr"],
            observed=given.get("observed"),
            required=given.get("required"),
            fn_input=given.get("fn_input"),
        )
    )
    got = summary(rsp)
    for key, value in expected.items():
        if key == "results":
            # compare only the severities the case names
            severities = {severity for severity, _ in value}
            got_results = tuple(r for r in got["results"] if r[0] in severities)
            contains(value, got_results, "results")
        elif key in ("resources", "requirements") and value == {}:
            assert got[key] == {}, f"{key}: expected none, got {sorted(got[key])}"
        else:
            contains(value, got[key], key)


def test_pinned_image_comes_from_the_composition() -> None:
    got = summary(run(request(xr(model="Qwen/Qwen2.5-1.5B-Instruct"))))
    assert got["status"]["plan"]["image"] == engine_image()


def test_unexpected_error_is_a_fatal_result_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    import function.fn

    def boom(_: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(function.fn, "compose", boom)
    got = summary(run(request(xr(model="Qwen/Qwen2.5-1.5B-Instruct"))))
    assert got["fatal"] is not None and "kaboom" in got["fatal"] and "bug" in got["fatal"]


@pytest.mark.parametrize(
    "required",
    [
        pytest.param({CLUSTER_REQ: []}, id="cluster gone"),
        pytest.param({CLUSTER_REQ: [cluster(status__apps=None)]}, id="cluster not ready"),
    ],
)
def test_kept_resources_carry_no_server_set_fields(required: dict[str, Any]) -> None:
    """Crossplane server-side-applies what the function returns: an observed object goes
    back without status and without the metadata the API server and Crossplane set
    (managedFields makes the apply fail)."""
    got = summary(
        run(
            request(
                xr(model="Qwen/Qwen2.5-1.5B-Instruct", clusterRef={"name": "gpus"}),
                observed=on_target({"vllm-runtime": OBSERVED_OBJECT}, "gpus", "inference"),
                required=required,
            )
        )
    )
    kept = got["resources"]["vllm-runtime"]
    assert kept == {
        "apiVersion": OBSERVED_OBJECT["apiVersion"],
        "kind": "Object",
        "metadata": {
            k: OBSERVED_OBJECT["metadata"][k]
            for k in ("name", "namespace", "labels", "annotations")
        },
        "spec": OBSERVED_OBJECT["spec"],
    }
