"""Weights from another source (spec.parameters.source): s3://, pvc:// and oci:// are read into
the same model cache the Hub's downloads fill, by a pinned tool (or the modelcar image
itself), and vLLM loads that copy under the claim's names, offline. The claim is still sized
from `model`, and status.plan.weights says so. What a hostile source gets is in
tests/security/catalogue.yaml."""

from __future__ import annotations

import copy
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    control_plane,
    engine_image,
    llmd_images,
    load_yaml,
    no_credentials,
    settle,
    simulator_image,
    weight_tools,
)

from dot_inference.apiserver import validate_objects
from function.backends import weights
from function.claim.spec import SpecError, parse
from function.compose import compose
from function.keys import FETCH, RUNTIME
from function.outcome import Inputs, Outcome

NS = "a-team"
DIGEST = "sha256:" + "ab" * 32


def claim(name: str = "m", model: str = "Qwen/Qwen2.5-7B-Instruct", **params: Any) -> dict:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"parameters": {"model": model, **params}},
    }


def run(xr: dict[str, Any], **kw: Any) -> Outcome:
    inputs = {"engine_image": engine_image(), **weight_tools(), **kw}
    return compose(Inputs(xr=xr, required=no_credentials(), **inputs))


def job_of(out: Outcome) -> dict[str, Any]:
    (key,) = [k for k in out.resources if k.startswith(FETCH)]
    return out.resources[key]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


# --------------------------------------------------------------------------- the claim

# (case, spec.parameters.source, what the parsed source holds)
PARSED = [
    ("a whole bucket", {"uri": "s3://models"}, {"scheme": "s3", "bucket": "models", "prefix": ""}),
    (
        "a prefix, its trailing slash dropped",
        {"uri": "s3://models/qwen/7b/"},
        {"bucket": "models", "prefix": "qwen/7b", "region": "us-east-1", "credentials": None},
    ),
    (
        "an S3-compatible store",
        {"uri": "s3://m.b.c/q", "endpoint": "https://s3.example.com:9000/", "region": "eu-west-3"},
        {"endpoint": "https://s3.example.com:9000", "region": "eu-west-3"},
    ),
    ("a claim's root", {"uri": "pvc://store"}, {"scheme": "pvc", "claim": "store", "path": ""}),
    (
        "a claim's directory",
        {"uri": "pvc://store/meta-llama/Llama-3.1-8B"},
        {"claim": "store", "path": "meta-llama/Llama-3.1-8B"},
    ),
    (
        "an image by digest",
        {"uri": f"oci://ghcr.io/acme/qwen@{DIGEST}"},
        {"scheme": "oci", "image": f"ghcr.io/acme/qwen@{DIGEST}"},
    ),
]


@pytest.mark.parametrize(("source", "holds"), [c[1:] for c in PARSED], ids=[c[0] for c in PARSED])
def test_a_source_reads_as_its_parts(source: dict[str, Any], holds: dict[str, Any]) -> None:
    parsed = parse(claim(source=source)).source
    assert parsed is not None
    assert {k: getattr(parsed, k) for k in holds} == holds


def test_the_access_key_is_two_keys_of_one_secret() -> None:
    ref = {"name": "minio", "accessKeyIdKey": "id"}
    parsed = parse(claim(source={"uri": "s3://models", "credentialsSecretRef": ref})).source
    assert parsed is not None and parsed.credentials is not None
    assert (parsed.credentials.access_key_id.name, parsed.credentials.access_key_id.key) == (
        "minio",
        "id",
    )
    assert parsed.credentials.secret_access_key.key == "AWS_SECRET_ACCESS_KEY"


# (case, spec.parameters.source, the field the refusal names, words it says)
REFUSED = [
    ("not an object", "s3://models", "spec.parameters.source", "must be an object"),
    ("no uri", {}, "spec.parameters.source.uri", "is not s3://bucket/prefix"),
    ("a scheme not read", {"uri": "gs://m/q"}, "spec.parameters.source.uri", "is not s3://"),
    ("a bucket in capitals", {"uri": "s3://Models"}, "spec.parameters.source.uri", "is not"),
    ("a climb out", {"uri": "pvc://store/a/../../b"}, "spec.parameters.source.uri", "`..`"),
    ("a dot segment", {"uri": "s3://models/./q"}, "spec.parameters.source.uri", "`.` or `..`"),
    ("an image without a tag", {"uri": "oci://r.io/m/q"}, "spec.parameters.source.uri", "is not"),
    (
        "an endpoint on an image",
        {"uri": "oci://r.io/m/q:v1", "endpoint": "https://s3.example.com"},
        "spec.parameters.source.endpoint",
        "applies to s3:// only",
    ),
    (
        "a region on a claim",
        {"uri": "pvc://store", "region": "eu-west-1"},
        "spec.parameters.source.region",
        "applies to s3:// only",
    ),
    (
        "an endpoint with a path",
        {"uri": "s3://models", "endpoint": "https://s3.example.com/bucket"},
        "spec.parameters.source.endpoint",
        "no path",
    ),
    (
        "an endpoint carrying a password",
        {"uri": "s3://models", "endpoint": "https://k:hunter2@s3.example.com"},
        "spec.parameters.source.endpoint",
        "carries credentials",
    ),
    (
        "a region",
        {"uri": "s3://models", "region": "Europe"},
        "spec.parameters.source.region",
        "region",
    ),
    (
        "a Secret name",
        {"uri": "s3://models", "credentialsSecretRef": {"name": "../x"}},
        "spec.parameters.source.credentialsSecretRef.name",
        "is not a Secret name",
    ),
    (
        "a Secret key",
        {"uri": "s3://models", "credentialsSecretRef": {"name": "x", "secretAccessKeyKey": "a b"}},
        "spec.parameters.source.credentialsSecretRef.secretAccessKeyKey",
        "is not a Secret key",
    ),
]


@pytest.mark.parametrize(
    ("source", "field", "says"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_a_bad_source_is_refused_naming_its_field(source: Any, field: str, says: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(claim(source=source))
    assert e.value.field == field
    assert says in e.value.message
    assert "hunter2" not in e.value.message and "hunter2" not in repr(e.value.value)


# --------------------------------------------------------------------------- the copy

# (case, source, the image that copies, the Job's volumes beside the cache)
COPIES = [
    ("s3", {"uri": "s3://models/qwen"}, "s3_tool_image", []),
    (
        "pvc",
        {"uri": "pvc://store/qwen"},
        "copy_tool_image",
        [
            {
                "name": "weights-source",
                "persistentVolumeClaim": {"claimName": "store", "readOnly": True},
            }
        ],
    ),
    ("oci", {"uri": "oci://r.example.com/m/qwen:v1"}, None, []),
]


@pytest.mark.parametrize(
    ("source", "tool", "volumes"), [c[1:] for c in COPIES], ids=[c[0] for c in COPIES]
)
def test_the_cache_is_filled_from_the_source_and_vllm_loads_the_copy(
    source: dict[str, Any], tool: str | None, volumes: list[dict[str, Any]]
) -> None:
    xr = claim(source=source, engine={"imagePullSecrets": [{"name": "regcred"}]})
    out = run(xr)
    assert out.fatal is None, out.fatal
    job = job_of(out)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # The pinned tool, read back from the Composition's input; an image holds its own copy.
    assert container["image"] == (weight_tools()[tool] if tool else source["uri"][6:])
    assert container["command"][:2] == ["/bin/sh", "-c"]
    env = env_of(container)
    path = env["DEST"]
    assert env["SOURCE"] == source["uri"] and path.startswith(weights.WEIGHTS_DIR + "/")
    assert pod["volumes"][1:] == volumes
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    # Nothing of the Hub: no token, no download program.
    assert "HF_TOKEN" not in env and not any("snapshot_download" in c for c in container["command"])
    runtime = out.resources[RUNTIME]["spec"]
    assert runtime["model"]["modelURL"] == path
    assert "hfTokenSecret" not in runtime["model"]
    args = runtime["vllmConfig"]["extraArgs"]
    assert args[args.index("--served-model-name") + 1] == "Qwen/Qwen2.5-7B-Instruct"
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in runtime["vllmConfig"]["env"]
    assert out.status["plan"]["weights"] | {"facts": ""} == {
        "source": source["uri"],
        "path": path,
        "copiedBy": f"Job {job['metadata']['name']}",
        "facts": "",
    }
    assert (
        "sized from the model catalog's entry for Qwen/Qwen2.5-7B-Instruct"
        in (out.status["plan"]["weights"]["facts"])
    )
    report = validate_objects([*out.resources.values()])
    assert report.ok, report.summary()


def test_a_new_source_copies_beside_the_old_one_under_a_new_job() -> None:
    first = run(claim(source={"uri": "s3://models/qwen/v1"}))
    again = run(claim(source={"uri": "s3://models/qwen/v1"}))
    second = run(claim(source={"uri": "s3://models/qwen/v2"}))
    name = [job_of(o)["metadata"]["name"] for o in (first, again, second)]
    dest = [
        env_of(job_of(o)["spec"]["template"]["spec"]["containers"][0])["DEST"]
        for o in (first, second)
    ]
    assert name[0] == name[1] != name[2]
    assert dest[0] != dest[1]


def test_s3_is_anonymous_without_a_key_and_never_the_nodes_own() -> None:
    anonymous = env_of(
        job_of(run(claim(source={"uri": "s3://open-models/qwen"})))["spec"]["template"]["spec"][
            "containers"
        ][0]
    )
    assert anonymous["ANONYMOUS"] == "1"
    assert "AWS_ACCESS_KEY_ID" not in anonymous
    keyed = env_of(
        job_of(
            run(claim(source={"uri": "s3://models/q", "credentialsSecretRef": {"name": "minio"}}))
        )["spec"]["template"]["spec"]["containers"][0]
    )
    assert "ANONYMOUS" not in keyed
    assert keyed["AWS_ACCESS_KEY_ID"] == {
        "secretKeyRef": {"name": "minio", "key": "AWS_ACCESS_KEY_ID"}
    }
    assert keyed["AWS_SECRET_ACCESS_KEY"] == {
        "secretKeyRef": {"name": "minio", "key": "AWS_SECRET_ACCESS_KEY"}
    }
    for env in (anonymous, keyed):
        assert env["AWS_EC2_METADATA_DISABLED"] == "true"


def test_a_gated_model_from_a_source_needs_no_hugging_face_token() -> None:
    llama = "meta-llama/Llama-3.1-8B-Instruct"
    hub = run(claim(model=llama))
    assert env_of(job_of(hub)["spec"]["template"]["spec"]["containers"][0])["HF_TOKEN"] == {
        "secretKeyRef": {"name": "hf-token", "key": "token"}
    }
    out = run(claim(model=llama, source={"uri": "pvc://store/llama"}))
    assert "HF_TOKEN" not in env_of(job_of(out)["spec"]["template"]["spec"]["containers"][0])
    assert "hfTokenSecret" not in out.resources[RUNTIME]["spec"]["model"]


def test_applied_alone_a_source_still_copies_by_job() -> None:
    """The plain manifests (Inputs.standalone): the engine downloads from the Hub itself, but
    it cannot reach a source, so the Job stays."""
    out = run(claim(source={"uri": "s3://models/qwen"}), standalone=True)
    assert (
        job_of(out)["spec"]["template"]["spec"]["containers"][0]["image"]
        == (weight_tools()["s3_tool_image"])
    )
    assert not [k for k in run(claim(), standalone=True).resources if k.startswith(FETCH)]


def test_without_its_tool_the_claim_is_told_what_the_platform_must_do() -> None:
    out = compose(Inputs(xr=claim(source={"uri": "s3://models/q"}), engine_image=engine_image()))
    assert out.fatal is not None
    assert out.fatal.startswith("spec.parameters.source.uri: the Composition passes no image")


def test_the_simulator_copies_nothing_and_says_so() -> None:
    xr = claim(source={"uri": "s3://models/qwen"}, engine={"simulate": True})
    out = run(xr, simulator_image=simulator_image())
    assert out.fatal is None, out.fatal
    assert not [k for k in out.resources if k.startswith(FETCH)]
    assert "weights" not in out.status["plan"]
    assert any(
        "spec.parameters.source" in w and "not used with spec.parameters.engine.simulate" in w
        for w in out.warnings
    ), out.warnings


# ------------------------------------------------------------- pods that fill their own


LLMD = next(
    d for d in load_yaml(EXAMPLES / "state" / "llm-llmd.yaml") if d["kind"] == "InferenceCluster"
)
PAIR = load_yaml(EXAMPLES / "state" / "llm-kimi-k2-multinode.yaml")[0]


def _pods(out: Outcome, kind: str) -> list[dict[str, Any]]:
    found = []
    for o in out.resources.values():
        m = o.get("spec", {}).get("forProvider", {}).get("manifest") or {}
        if m.get("kind") == kind and kind == "StatefulSet":
            found.append(m["spec"]["template"]["spec"])
        elif m.get("kind") == kind:
            t = m["spec"]["leaderWorkerTemplate"]
            found += [t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]]
    return found


@pytest.mark.parametrize(
    ("xr", "cluster", "kind", "python"),
    [
        (
            claim(backend="llmd", clusterRef={"name": "inference-llmd"}),
            LLMD,
            "StatefulSet",
            "python3",
        ),
        (
            claim(model="moonshotai/Kimi-K2-Instruct", clusterRef={"name": "inference-h200-pair"}),
            PAIR,
            "LeaderWorkerSet",
            "/opt/venv/bin/python",
        ),
    ],
    ids=["llm-d", "multi-node"],
)
def test_pods_with_caches_of_their_own_fill_them_from_the_source(
    xr: dict[str, Any], cluster: dict[str, Any], kind: str, python: str
) -> None:
    cluster = copy.deepcopy(cluster)
    cluster["status"].get("storage", {}).pop("shared", None)  # a cache per pod
    hub = settle(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            **llmd_images(),
            **weight_tools(),
        ),
        control_plane(xr, [], cluster),
    )
    (init,) = {
        init["name"]: init
        for p in _pods(hub, kind)
        for init in p["initContainers"]
        if init["name"] == "model-fetch"
    }.values()
    assert init["command"][0] == python  # the Hub's download, by the engine image's Python
    sourced = copy.deepcopy(xr)
    sourced["spec"]["parameters"]["source"] = {"uri": "pvc://store/kimi"}
    out = settle(
        Inputs(
            xr=sourced,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            **llmd_images(),
            **weight_tools(),
        ),
        control_plane(sourced, [], cluster),
    )
    assert out.fatal is None, out.fatal
    pods = _pods(out, kind)
    assert pods
    for pod in pods:
        (fill,) = [c for c in pod["initContainers"] if c["name"] == "model-fetch"]
        assert fill["image"] == weight_tools()["copy_tool_image"]
        assert {
            "name": "weights-source",
            "mountPath": "/source",
            "readOnly": True,
            "subPath": "kimi",
        } in fill["volumeMounts"]
        assert any(v["name"] == "weights-source" for v in pod["volumes"])
        (vllm,) = [c for c in pod["containers"] if c["name"] == "vllm"]
        path = env_of(fill)["DEST"]
        assert path in vllm["args"] and xr["spec"]["parameters"]["model"] in vllm["args"]


# --------------------------------------------------------------------------- the programs, run


def _sh(script: str, env: dict[str, str], path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", script],
        env={"PATH": f"{path}:{os.environ['PATH']}", **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_copy_copies_a_model_and_fails_on_a_directory_without_one(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "sub" / "model.safetensors").write_text("w")
    dest = tmp_path / "cache" / "models" / "abc"
    done = _sh(
        weights.COPY_SCRIPT,
        {"FROM": str(model), "DEST": str(dest), "SOURCE": "pvc://s/m"},
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (dest / "config.json").exists() and (dest / "sub" / "model.safetensors").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    failed = _sh(
        weights.COPY_SCRIPT,
        {"FROM": str(empty), "DEST": str(tmp_path / "d2"), "SOURCE": "pvc://s/x"},
        tmp_path,
    )
    assert failed.returncode == 1
    assert "no config.json in pvc://s/x" in failed.stderr


@pytest.mark.parametrize(("anonymous", "signed"), [("1", False), (None, True)])
def test_the_s3_copy_signs_only_with_a_key(
    tmp_path: Path, anonymous: str | None, signed: bool
) -> None:
    """The script, run with a stand-in `aws` that records its arguments and writes what a sync
    would."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    aws = bin_ / "aws"
    aws.write_text('#!/bin/sh\necho "$@" > "$ARGS"\nmkdir -p "$4" && echo {} > "$4/config.json"\n')
    aws.chmod(aws.stat().st_mode | stat.S_IEXEC)
    env = {
        "SOURCE": "s3://models/q",
        "DEST": str(tmp_path / "dest"),
        "ARGS": str(tmp_path / "args"),
    }
    if anonymous:
        env["ANONYMOUS"] = anonymous
    done = _sh(weights.S3_SCRIPT, env, bin_)
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "args").read_text().split()
    assert args[:4] == ["s3", "sync", "s3://models/q", str(tmp_path / "dest")]
    assert ("--no-sign-request" not in args) is signed


# --------------------------------------------------------------------------- the examples

SOURCED = [
    p.name
    for p in sorted(EXAMPLES.glob("llm-*.yaml"))
    if any((d["spec"].get("parameters") or {}).get("source") for d in load_yaml(p))
]


def test_there_is_an_example_for_each_scheme() -> None:
    schemes = {
        d["spec"]["parameters"]["source"]["uri"].split("://")[0]
        for name in SOURCED
        for d in load_yaml(EXAMPLES / name)
    }
    assert schemes == {"s3", "pvc", "oci"}


@pytest.mark.parametrize("example", SOURCED)
def test_each_source_example_is_sized_and_says_from_what(example: str) -> None:
    from conftest import PACKAGE

    from dot_inference.crossplane import documents, render

    (xr,) = load_yaml(EXAMPLES / example)
    state = EXAMPLES / "state" / example
    required = load_yaml(state) if state.exists() else []
    result = render.render_in_package(documents.load_package(PACKAGE), xr, required=required)
    assert result.fatal is None, result.fatal
    plan = result.xr["status"]["plan"]
    model = xr["spec"]["parameters"]["model"]
    assert plan["fits"] is True and plan["gpus"] >= 1
    assert plan["weights"]["source"] == xr["spec"]["parameters"]["source"]["uri"]
    assert plan["weights"]["facts"].startswith(f"sized from the model catalog's entry for {model}")


# --------------------------------------------------------------------------- where from


def _target(**changes: Any) -> Any:
    import dataclasses

    from function.cluster.target import without_cluster

    return dataclasses.replace(without_cluster(parse(claim())), **changes)


# (case, source, the target's changes, the refusal's words, or None when allowed)
WHERE_FROM = [
    ("AWS itself", {"uri": "s3://models/q"}, {}, None),
    (
        "a public store over https",
        {"uri": "s3://models/q", "endpoint": "https://s3.example.com"},
        {},
        None,
    ),
    (
        "a Service of the cluster",
        {"uri": "s3://models/q", "endpoint": "https://minio.ns.svc.cluster.local"},
        {},
        "minio.ns.svc.cluster.local is not a public DNS name",
    ),
    (
        "the metadata address",
        {"uri": "s3://models/q", "endpoint": "http://169.254.169.254"},
        {},
        "169.254.169.254 is not a public DNS name",
    ),
    (
        "a Service the cluster lists, over http",
        {"uri": "s3://models/q", "endpoint": "http://minio.ns.svc.cluster.local:9000"},
        {"cluster": "c", "model_source_hosts": ("minio.ns.svc.cluster.local",)},
        None,
    ),
    (
        "a Service another host is listed for",
        {"uri": "s3://models/q", "endpoint": "https://minio.ns.svc.cluster.local"},
        {"cluster": "c", "model_source_hosts": ("minio.other.svc.cluster.local",)},
        "listed in spec.parameters.tenancy.modelSourceHosts of InferenceCluster a-team/c",
    ),
    (
        "a public store over http",
        {"uri": "s3://models/q", "endpoint": "http://s3.example.com"},
        {},
        "is plain http to a public host",
    ),
    (
        "a public store the cluster lists, over http",
        {"uri": "s3://models/q", "endpoint": "http://s3.example.com"},
        {"cluster": "c", "model_source_hosts": ("s3.example.com",)},
        None,
    ),
    ("the claim's own namespace's claim", {"uri": "pvc://store/q"}, {}, None),
    (
        "a claim of the namespace targetNamespace names",
        {"uri": "pvc://store/q"},
        {"namespace": "shared"},
        "this model deploys into shared (spec.parameters.targetNamespace), not its own "
        "namespace a-team",
    ),
    ("an image, anywhere", {"uri": "oci://r.example.com/m/q:v1"}, {"namespace": "shared"}, None),
]


@pytest.mark.parametrize(
    ("source", "target", "says"), [c[1:] for c in WHERE_FROM], ids=[c[0] for c in WHERE_FROM]
)
def test_weights_come_only_from_where_the_claim_may_read(
    source: dict[str, Any], target: dict[str, Any], says: str | None
) -> None:
    from function.policy.weights import check_source

    spec = parse(claim(source=source))
    if says is None:
        check_source(spec, _target(**target))
        return
    with pytest.raises(SpecError) as e:
        check_source(spec, _target(**target))
    field = (
        "spec.parameters.source.uri"
        if source["uri"].startswith("pvc")
        else ("spec.parameters.source.endpoint")
    )
    assert e.value.field == field
    assert e.value.value == source.get("endpoint", source["uri"])
    assert e.value.message.startswith(f"{field}: ")
    assert says in e.value.message
