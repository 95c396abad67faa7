"""The model cache: sized from the model, filled by a download Job before the engine starts,
kept across restarts and model changes, and shaped for the pinned controller.

Before it, the weights went to the container's disk on every start (Kimi-K2.5's 595 GB did
not fit the clusters' 200 GB GPU node disks) and one fixed startup budget covered download
and load whatever the model's size.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import EXAMPLES, by_base, engine_image, load_yaml

from dot_inference import production_stack_operator as operator
from dot_inference.production_stack_operator import pvc_needs_update
from function.compose import compose
from function.keys import CACHE, FETCH, RUNTIME
from function.outcome import Inputs, Outcome
from function.plan import model_fetch, storage

CLUSTER_STATE = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]


def claim(name: str = "m", **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": "a-team"},
        "spec": {"parameters": params},
    }


def run(xr: dict[str, Any], observed: dict[str, Any] | None = None, **kw: Any) -> Outcome:
    return compose(Inputs(xr=xr, engine_image=engine_image(), observed=observed or {}, **kw))


def fetch_key(out: Outcome) -> str:
    return next(k for k in out.resources if k.startswith(FETCH))


def cond(out: Outcome, typ: str) -> tuple[str, str, str]:
    c = next(c for c in out.conditions if c.type == typ)
    return c.status, c.reason, c.message


# --------------------------------------------------------------------------- the plan


@pytest.mark.parametrize(
    ("weights", "needed"),
    [
        (None, storage.CACHE_UNKNOWN_MODEL_GIB),
        (0.4, 20),  # bge-base: the floor
        (2.9, 20),  # Qwen2.5-1.5B
        (61.0, 80),  # 61 x 1.1 + 10 = 77.1
        (554.1, 620),  # Kimi-K2.5 (595 GB checkpoint)
    ],
)
def test_cache_holds_the_weights_with_margin(weights: float | None, needed: int) -> None:
    assert storage.needed_gib(weights) == needed
    if weights:
        assert needed >= weights * 1.1


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"weights_gib": 554.1, "requested_gib": 500, "observed_gib": None},
            "spec.parameters.storage.size: 500Gi cannot hold the 554 GiB of weights; "
            "use at least 620Gi (or omit it)",
        ),
        (
            {"weights_gib": 2.9, "requested_gib": 30, "observed_gib": 100},
            "spec.parameters.storage.size: the model cache already has 100Gi and a "
            "PersistentVolumeClaim cannot shrink; use at least 100Gi",
        ),
        ({"weights_gib": 2.9, "requested_gib": None, "observed_gib": 100}, 100),
        ({"weights_gib": 554.1, "requested_gib": None, "observed_gib": 100}, 620),
        ({"weights_gib": 2.9, "requested_gib": 80, "observed_gib": None}, 80),
        (
            {"weights_gib": 2.9, "requested_gib": 1024000, "observed_gib": None},
            "spec.parameters.storage.size: 1000Ti is more than 4 times the 20Gi cache the "
            "model's 2.9 GiB of weights need; use at most 80Gi (or omit it)",
        ),
        ({"weights_gib": 2.9, "requested_gib": 100, "observed_gib": 100}, 100),
        ({"weights_gib": None, "requested_gib": 400, "observed_gib": None}, 400),
        (
            {"weights_gib": None, "requested_gib": 4096, "observed_gib": None},
            "spec.parameters.storage.size: 4Ti is more than 4 times the 100Gi cache a model of "
            "unknown size is planned with; use at most 400Gi (or omit it)",
        ),
        ({"weights_gib": 2.9, "requested_gib": 200, "observed_gib": None, "kept_gib": 200}, 200),
        (
            {"weights_gib": 2.9, "requested_gib": 80, "observed_gib": None, "max_gib": 50},
            "spec.parameters.storage.size: 80Gi is above the 50Gi the platform team allows one "
            "model's cache (CAP); use at most 50Gi",
        ),
        (
            {"weights_gib": 554.1, "requested_gib": None, "observed_gib": None, "max_gib": 500},
            "spec.parameters.storage.size: the model's cache needs 620Gi, above the 500Gi the "
            "platform team allows one model's cache (CAP); this model needs a cluster that "
            "allows more",
        ),
        ({"weights_gib": 2.9, "requested_gib": None, "observed_gib": 60, "max_gib": 50}, 60),
    ],
    ids=[
        "too small",
        "shrink",
        "keeps a bigger claim",
        "grows",
        "explicit, at most 4x what the model needs",
        "more than 4x what the model needs",
        "4x is measured beside what the claim already has",
        "a model of unknown size: 4x the size it is planned with",
        "a model of unknown size: more",
        "a StatefulSet's cache template keeps its size",
        "above the cluster's cap",
        "a model larger than the cluster's cap",
        "a cache that already exists above a new cap stays",
    ],
)
def test_cache_size_rules(given: dict[str, Any], expected: int | str) -> None:
    call = {**given, "load_rate_mib_s": None, "field": "spec.parameters.storage.size"}
    call["cap_field"] = "CAP"
    if isinstance(expected, str):
        with pytest.raises(storage.StorageError) as e:
            storage.plan_cache(**call)
        assert e.value.message == expected
    else:
        assert storage.plan_cache(**call).size_gib == expected


@pytest.mark.parametrize(
    ("gib", "text"), [(20, "20Gi"), (620, "620Gi"), (1024, "1Ti"), (1536, "1536Gi"), (2048, "2Ti")]
)
def test_sizes_are_written_as_the_api_server_writes_them(gib: int, text: str) -> None:
    assert storage.quantity(gib) == text
    assert storage.parse_gib(text) == gib


def test_timings_follow_the_weights_and_the_storage() -> None:
    def plan(weights: float, rate: float | None) -> storage.CachePlan:
        return storage.plan_cache(
            weights_gib=weights,
            requested_gib=None,
            observed_gib=None,
            load_rate_mib_s=rate,
            field="f",
        )

    small, big = plan(2.9, None), plan(554.1, None)
    assert big.download_deadline_s > small.download_deadline_s > storage.DOWNLOAD_FIXED_S
    assert big.start_s > small.start_s
    # 554 GiB at the default 125 MiB/s: over an hour of reading, past the operator's probe.
    assert not big.fits_startup_budget and small.fits_startup_budget
    assert plan(554.1, 1000.0).fits_startup_budget, "a fast model-cache class starts in time"
    # A rate that grows with the volume (GCP pd-ssd 0.48 MiB/s per GiB): a small cache reads
    # slowly, a big one up to the class's maximum.
    per_gib = storage.plan_cache(
        weights_gib=2.9,
        requested_gib=None,
        observed_gib=None,
        load_rate_mib_s=1200.0,
        field="f",
        load_rate_mib_s_per_gib=0.48,
    )
    assert per_gib.load_rate_mib_s == 9.6
    assert big.startup_budget_s == 120 + 100 * 20


# --------------------------------------------------------------------------- composed


@pytest.mark.parametrize(
    "xr",
    [
        claim(model="Qwen/Qwen2.5-1.5B-Instruct"),
        claim(model="moonshotai/Kimi-K2.5", gpu=8),
        claim(model="BAAI/bge-base-en-v1.5"),
    ],
    ids=["qwen", "kimi", "bge"],
)
def test_runtime_cache_and_job_fit_together(xr: dict[str, Any]) -> None:
    first = run(xr)
    out = run(xr, observed={CACHE: first.resources[CACHE]})  # the claim exists
    assert out.fatal is None
    runtime, pvc = out.resources[RUNTIME], out.resources[CACHE]
    job = out.resources[fetch_key(out)]
    size = pvc["spec"]["resources"]["requests"]["storage"]
    assert pvc["metadata"]["name"] == runtime["metadata"]["name"], "the controller mounts <name>"
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert runtime["spec"]["storageConfig"] == {
        "enabled": True,
        "size": size,
        "accessMode": "ReadWriteOnce",
        "mountPath": "/data",
    }
    assert not pvc_needs_update(size, runtime), "the controller leaves the claim alone"
    env = {e["name"]: e["value"] for e in runtime["spec"]["vllmConfig"]["env"]}
    assert env["HF_HOME"] == "/data/huggingface"
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": pvc["metadata"]["name"]}}
    ]
    container = pod["containers"][0]
    assert container["command"][-1] == xr["spec"]["parameters"]["model"]
    assert {"name": "HF_HOME", "value": "/data/huggingface"} in container["env"]
    assert (
        container["image"]
        == runtime["spec"]["deploymentConfig"]["image"]["registry"]
        + "/"
        + (runtime["spec"]["deploymentConfig"]["image"]["name"])
    )
    assert (
        job["spec"]["activeDeadlineSeconds"]
        == out.status["plan"]["cache"]["downloadDeadlineSeconds"]
    )
    assert runtime["spec"]["deploymentConfig"]["replicas"] == 0, "no pod before the download"
    # Its pods go with it whoever deletes it: a batch/v1 Job's default propagation orphans
    # them, and a scheduled orphan holds the claim in Terminating (found on the plane).
    assert job["metadata"]["finalizers"] == ["foregroundDeletion"]


def test_kimi_weights_go_to_a_volume_that_holds_them() -> None:
    out = run(claim(model="moonshotai/Kimi-K2.5", gpu=8))
    size = storage.parse_gib(out.resources[CACHE]["spec"]["resources"]["requests"]["storage"])
    assert size is not None and size * 1024**3 > 595e9, "the 595 GB checkpoint fits the cache"


CLAIM_RACE = [
    # (name, observed: claim exists, download done) -> storage on, replicas
    ("nothing yet", (False, False), (False, 0)),
    ("the claim exists, downloading", (True, False), (True, 0)),
    ("download done, the claim not observed", (False, True), (False, 0)),
    ("the claim exists, download done", (True, True), (True, 1)),
]


@pytest.mark.parametrize(
    ("observed", "expected"), [c[1:] for c in CLAIM_RACE], ids=[c[0] for c in CLAIM_RACE]
)
def test_the_runtime_mounts_the_claim_only_once_it_exists(
    observed: tuple[bool, bool], expected: tuple[bool, int]
) -> None:
    """With storage on and no claim of its name, the production-stack controller makes one
    controlled by the runtime (pvcForVLLMRuntime at the pin), which Crossplane can then never
    own; Crossplane applies the claim and the runtime in one pass in no set order. So the
    runtime has no storageConfig (and no pod) until our claim exists."""
    xr = claim(model="Qwen/Qwen2.5-1.5B-Instruct")
    first = run(xr)
    state: dict[str, Any] = {}
    if observed[0]:
        state[CACHE] = first.resources[CACHE]
    if observed[1]:
        state[fetch_key(first)] = {"status": {"succeeded": 1}}
    out = run(xr, observed=state)
    assert out.fatal is None, out.fatal
    runtime = out.resources[RUNTIME]["spec"]
    assert ("storageConfig" in runtime) is expected[0]
    assert runtime["deploymentConfig"]["replicas"] == expected[1]
    # What the operator would make of it (its model): no claim of its own while ours is missing.
    assert (operator.pvc_for(out.resources[RUNTIME]) is not None) is expected[0]


STANDALONE = [
    # (name, claim parameters) -> (a download Job composed, replicas, the engine offline)
    (
        "the engine downloads itself",
        {"model": "Qwen/Qwen2.5-1.5B-Instruct"},
        (False, 1, False),
    ),
    (
        "replicas as the claim asks",
        {
            "model": "BAAI/bge-base-en-v1.5",
            "replicas": 2,
            "storage": {"className": "nfs", "accessMode": "ReadWriteMany"},
        },
        (False, 2, False),
    ),
    (
        "behind an API key the engine is offline: the Job downloads",
        {
            "model": "Qwen/Qwen2.5-1.5B-Instruct",
            "apiKeySecretRef": {"name": "qwen-api", "key": "key"},
        },
        (True, 1, True),
    ),
]


@pytest.mark.parametrize(
    ("params", "expected"), [c[1:] for c in STANDALONE], ids=[c[0] for c in STANDALONE]
)
def test_composed_for_kubectl_apply_alone_the_engine_runs_as_the_claim_asks(
    params: dict[str, Any], expected: tuple[bool, int, bool]
) -> None:
    """examples/manifests: no controller observes the download and raises the replicas, so
    they are what the claim asks from the start, the runtime mounts its claim, and the engine
    downloads the weights there unless it runs offline."""
    out = run(claim(**params), standalone=True)
    assert out.fatal is None, out.fatal
    has_job, replicas, offline = expected
    assert any(k.startswith(FETCH) for k in out.resources) is has_job
    runtime = out.resources[RUNTIME]["spec"]
    assert runtime["deploymentConfig"]["replicas"] == replicas
    assert runtime["storageConfig"]["enabled"] is True
    # The claim of the runtime's name is in the same manifests, so the operator makes none.
    assert out.resources[CACHE]["metadata"]["name"] == out.resources[RUNTIME]["metadata"]["name"]
    env = {e["name"]: e["value"] for e in runtime["vllmConfig"]["env"]}
    assert env["HF_HOME"].startswith(runtime["storageConfig"]["mountPath"])
    assert ("HF_HUB_OFFLINE" in env) is offline


def test_the_engine_starts_when_the_model_is_cached() -> None:
    xr = claim(model="Qwen/Qwen2.5-1.5B-Instruct")
    first = run(xr)
    key = fetch_key(first)
    assert cond(first, "ModelCache")[:2] == ("False", "Downloading")
    assert cond(first, "Serving")[:2] == ("False", "Downloading")
    assert first.ready[key] is False
    done = run(xr, observed={key: {"status": {"succeeded": 1}}, CACHE: first.resources[CACHE]})
    assert done.resources[RUNTIME]["spec"]["deploymentConfig"]["replicas"] == 1
    assert done.ready[key] is True
    status, reason, message = cond(done, "ModelCache")
    assert (status, reason) == ("True", "Cached")
    assert "startup probe" in message


def test_a_failed_download_says_why_and_how_to_retry() -> None:
    xr = claim(model="meta-llama/Llama-3.1-8B-Instruct")
    key = fetch_key(run(xr))
    failed = {
        "status": {
            "failed": 7,
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ],
        }
    }
    status, reason, message = cond(run(xr, observed={key: failed}), "ModelCache")
    assert (status, reason) == ("False", "DownloadFailed")
    assert "Job has reached the specified backoff limit" in message
    assert "spec.parameters.hfTokenSecretRef" in message and "delete the Job" in message


def test_a_new_model_downloads_while_the_old_one_keeps_serving() -> None:
    old = claim(model="Qwen/Qwen2.5-1.5B-Instruct")
    first = run(old)
    serving = copy.deepcopy(first.resources[RUNTIME])
    serving["spec"]["deploymentConfig"]["replicas"] = 1
    serving["status"] = {"availableReplicas": 1, "modelStatus": "Ready"}
    serving["metadata"]["managedFields"] = [{"manager": "x"}]
    new = claim(model="Qwen/Qwen2.5-7B-Instruct")
    out = run(new, observed={RUNTIME: serving, CACHE: first.resources[CACHE]})
    kept = out.resources[RUNTIME]
    assert kept["spec"] == serving["spec"], "the running engine is kept as it is"
    assert "status" not in kept and "managedFields" not in kept["metadata"]
    assert fetch_key(out) != fetch_key(first), "a new Job for the new model"
    assert "keeps serving" in cond(out, "ModelCache")[2]
    assert cond(out, "Serving")[0] == "True"
    # Once the new model is cached, the engine switches to it.
    done = run(
        new,
        observed={
            RUNTIME: serving,
            CACHE: first.resources[CACHE],
            fetch_key(out): {"status": {"succeeded": 1}},
        },
    )
    assert done.resources[RUNTIME]["spec"]["model"]["modelURL"] == "Qwen/Qwen2.5-7B-Instruct"


def test_the_claim_grows_first_and_the_runtime_follows() -> None:
    """The runtime names the claim's current size: the controller would rewrite a claim of
    another size, which the API server refuses once it is bound."""
    small = run(claim(model="Qwen/Qwen2.5-1.5B-Instruct"))
    observed_claim = copy.deepcopy(small.resources[CACHE])
    out = run(claim(model="Qwen/Qwen2.5-72B-Instruct"), observed={CACHE: observed_claim})
    assert out.resources[CACHE]["spec"]["resources"]["requests"]["storage"] == "160Gi"
    assert out.resources[RUNTIME]["spec"]["storageConfig"]["size"] == "20Gi"
    assert not pvc_needs_update("20Gi", out.resources[RUNTIME])


@pytest.mark.parametrize(
    ("params", "required", "expected"),
    [
        ({}, {}, None),
        ({"storage": {"className": "fast"}}, {}, "fast"),
        (
            {"clusterRef": {"name": "inference-aws"}},
            {"inference-cluster": [CLUSTER_STATE]},
            (CLUSTER_STATE["status"].get("storage") or {}).get("className"),
        ),
        (
            {"clusterRef": {"name": "inference-aws"}, "storage": {"className": "mine"}},
            {"inference-cluster": [CLUSTER_STATE]},
            "mine",
        ),
    ],
    ids=["default class", "claim's class", "cluster's class", "claim over cluster"],
)
def test_storage_class(params: dict, required: dict, expected: str | None) -> None:
    out = run(claim(model="Qwen/Qwen2.5-1.5B-Instruct", **params), required=required)
    pvc = by_base(out.resources, CACHE)
    pvc = pvc["spec"]["forProvider"]["manifest"] if pvc["kind"] == "Object" else pvc
    assert pvc["spec"].get("storageClassName") == expected


@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("100Gi", "spec.parameters.storage.size: 100Gi cannot hold the 554 GiB of weights"),
        ("lots", "spec.parameters.storage.size: 'lots' is not a size"),
        (800, "spec.parameters.storage.size: 800 is not a size"),
    ],
)
def test_bad_storage_sizes_are_refused(size: object, message: str) -> None:
    out = run(claim(model="moonshotai/Kimi-K2.5", gpu=8, storage={"size": size}))
    assert out.fatal and out.fatal.startswith(message)
    assert not out.resources


def test_a_slow_volume_is_a_warning_with_what_to_change() -> None:
    out = run(claim(model="moonshotai/Kimi-K2.5", gpu=8))
    warning = next(w for w in out.warnings if "startup probe" in w)
    assert "2120 s" in warning and "spec.parameters.storage.className" in warning


# --------------------------------------------------------------------------- the Job's program


@pytest.mark.parametrize(
    ("files", "weights"),
    [
        (["model.safetensors", "pytorch_model.bin", "config.json"], "*.safetensors"),
        (["model-00001-of-00002.safetensors", "original/consolidated.00.pth"], "*.safetensors"),
        (["pytorch_model.bin", "config.json"], "*.bin"),
        (["model.pt"], "*.pt"),
        (["config.json", "tokenizer.json"], None),
    ],
    ids=["safetensors over bin", "safetensors, original ignored", "bin only", "pt", "no weights"],
)
def test_the_download_picks_files_like_vllm(files: list[str], weights: str | None) -> None:
    patterns = model_fetch.select(files)
    assert patterns[: 1 if weights else 0] == ([weights] if weights else [])
    assert [p for p in patterns if p in model_fetch.WEIGHTS] == ([weights] if weights else [])
    assert "*.json" in patterns and "tokenizer*" in patterns
    assert "original/**/*" in model_fetch.IGNORE
