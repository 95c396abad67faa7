"""The names of the resources an LLMInference composes (the keys of its desired resources)."""

from __future__ import annotations

# Composition resource names.
RUNTIME = "vllm-runtime"


INGRESS = "ingress"


NAMESPACE = "namespace"


HF_TOKEN = "hf-token"


API_KEY = "api-key"


# engine.env's Secret-sourced variables and engine.imagePullSecrets, copied to another cluster
# (`<key>-<index>`).
ENV_SECRET = "secret-env"


PULL_SECRET = "secret-pull"
# spec.parameters.source.credentialsSecretRef's keys, each copied to another cluster.
SOURCE_SECRET = "secret-source"


CACHE = "model-cache"


SHARED_CACHE = "shared-model-cache"


CLUSTER_USAGE = "usage-inference-cluster"


# A simulated engine (engine.simulate): its Deployment and Service; KEDA's ScaledObject.
SIMULATOR = "simulator"


SIMULATOR_SERVICE = "simulator-service"


SCALER = "scaled-object"


# A model over several nodes (apps.lws): its LeaderWorkerSet and its leaders' Service.
LWS = "leader-worker-set"


LWS_SERVICE = "leader-service"


KEDA_USAGE = "usage-keda"


# An llm-d model (backend llmd): its vLLM StatefulSets (this prefix, the role and the digest
# of the cache), their headless Service, the InferencePool, the endpoint picker (Deployment,
# Service, configuration), the identity of its router and the HTTPRoute.
LLMD_ENGINE = "llmd"


LLMD_ENGINES_SERVICE = "llmd-engines-service"


LLMD_POOL = "inference-pool"


LLMD_PICKER = "endpoint-picker"


LLMD_PICKER_SERVICE = "endpoint-picker-service"


LLMD_PICKER_CONFIG = "endpoint-picker-config"


LLMD_ROUTER_IDENTITY = ("router-serviceaccount", "router-role", "router-rolebinding")


LLMD_ROUTE = "http-route"


# The download Job's key: this prefix and the digest of its name (a new Job per model).
FETCH = "model-fetch"
