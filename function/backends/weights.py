"""How a model cache is filled: the container that puts the weights there (the download Job's,
or a pod's init container), and what it reads from.

- From the Hugging Face Hub: the engine image's Python runs function/plan/model_fetch.py into
  HF_HOME on the cache, and vLLM loads the model by its id, offline.
- From spec.parameters.source: a tool copies the directory into `/data/models/<digest>` on the
  cache (WEIGHTS_DIR), and vLLM loads that path, served under the claim's names
  (--served-model-name). The digest is of the source, so a new source fills a directory
  beside the one the running engine reads. Each program ends by checking that config.json is
  there: a wrong prefix fails the Job, which the ModelCache condition reports, rather than
  an engine that cannot start.
  - s3://: the AWS CLI (its image pinned in kcl/versions.k): `aws s3 sync`, which resumes, to
    AWS or an S3-compatible endpoint (AWS_ENDPOINT_URL, read by AWS CLI v2), with the claim's
    access key from its Secret, else anonymously (`--no-sign-request`). Never the node's own
    credentials: the instance metadata endpoint is off (AWS_EC2_METADATA_DISABLED).
  - pvc://: busybox (pinned) copies the claim's directory, mounted read-only at its path
    (`subPath`: the kubelet keeps the mount inside the volume).
  - oci://: the image itself, as KServe's modelcar contract has it: the weights under /models
    and a POSIX shell (KServe's own modelcar sidecar runs `sh` in it); pulled with the engine's
    pull Secrets.

Every value a claim gives reaches the programs as a variable, never as text of the script.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from function.backends.cache_objects import CACHE_ENV, CACHE_MOUNT, FETCH_SCRIPT
from function.claim.source import WeightSource
from function.claim.spec import LLMSpec, P, SpecError
from function.model import sizing
from function.outcome import Inputs
from function.plan import storage
from function.policy.secrets import Secrets

WEIGHTS_DIR = f"{CACHE_MOUNT}/models"

# The directory copied from (a pvc:// source's mount in the fill's container).
SOURCE_MOUNT = "/source"
# Where an oci:// image holds the weights (KServe modelcars: `COPY data/ /models/`).
MODELCAR_DIR = "/models"

_CHECK = (
    'test -f "$DEST/config.json" || '
    '{ echo "no config.json in $SOURCE: name the directory that holds the model" >&2; exit 1; }'
)
S3_SCRIPT = (
    "set -eu\n"
    'aws s3 sync "$SOURCE" "$DEST" --no-progress --only-show-errors '
    "${ANONYMOUS:+--no-sign-request}\n" + _CHECK + "\n"
)
COPY_SCRIPT = 'set -eu\nmkdir -p "$DEST"\ncp -a "$FROM/." "$DEST/"\n' + _CHECK + "\n"


@dataclass(frozen=True)
class Tools:
    """The pinned images that copy weights from a source (the Composition's input)."""

    s3: str | None = None
    copy: str | None = None


@dataclass(frozen=True)
class Fill:
    """The container that fills a model cache: its image, command and variables, the volumes
    it reads beside the cache, and what its Job's name digests (a change runs a new Job)."""

    image: str
    command: tuple[str, ...]
    env: tuple[Mapping[str, Any], ...]
    identity: tuple[Any, ...]
    mounts: tuple[Mapping[str, Any], ...] = ()
    volumes: tuple[Mapping[str, Any], ...] = ()
    # Registry credentials of its image: the engine's (a private mirror of a tool, a modelcar).
    pull_secrets: tuple[str, ...] = ()


def weights_path(source: WeightSource) -> str:
    """Where a source's weights sit on the cache."""
    what = [source.uri, source.endpoint, source.region]
    return f"{WEIGHTS_DIR}/{hashlib.sha256(json.dumps(what).encode()).hexdigest()[:12]}"


def engine_model(spec: LLMSpec) -> str:
    """What vLLM loads: the Hub id, or the source's directory on the cache."""
    return spec.model if spec.source is None else weights_path(spec.source)


def hub_fill(
    spec: LLMSpec,
    image: str,
    python: str,
    hf_token: tuple[str, str] | None,
    pull_secrets: Sequence[str] = (),
) -> Fill:
    """function/plan/model_fetch.py under the engine image's Python, into HF_HOME, with the
    Hugging Face token (Secret, key) when the model needs one."""
    revision = spec.engine.revision
    token = (
        (
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": hf_token[0], "key": hf_token[1]}},
            },
        )
        if hf_token
        else ()
    )
    return Fill(
        image=image,
        command=(python, "-c", FETCH_SCRIPT, spec.model, *([revision] if revision else [])),
        env=(
            {"name": "HF_HOME", "value": dict(CACHE_ENV)["HF_HOME"]},
            # hf_xet keeps a chunk cache (10 GB by default) under HF_HOME: not on the volume.
            {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"},
            *token,
        ),
        identity=(spec.model, image, hf_token, *([revision] if revision else [])),
        pull_secrets=tuple(pull_secrets),
    )


def source_fill(
    source: WeightSource,
    tools: Tools,
    credentials: Sequence[tuple[str, tuple[str, str]]],
    pull_secrets: Sequence[str] = (),
) -> Fill:
    """The copy of a source's directory into weights_path(source). `credentials`: the S3
    access key's variables, as (variable, (Secret, key)) on the target."""
    dest = weights_path(source)
    common = ({"name": "SOURCE", "value": source.uri}, {"name": "DEST", "value": dest})
    if source.scheme == "s3":
        image = _tool(tools.s3, "s3", source)
        env: list[Mapping[str, Any]] = [
            *common,
            {"name": "AWS_DEFAULT_REGION", "value": source.region},
            {"name": "AWS_EC2_METADATA_DISABLED", "value": "true"},
        ]
        if source.endpoint:
            env.append({"name": "AWS_ENDPOINT_URL", "value": source.endpoint})
        if credentials:
            env += [
                {"name": var, "valueFrom": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}}
                for var, ref in credentials
            ]
        else:
            env.append({"name": "ANONYMOUS", "value": "1"})
        return Fill(
            image=image,
            command=("/bin/sh", "-c", S3_SCRIPT),
            env=tuple(env),
            identity=(source.uri, source.endpoint, source.region, list(credentials), image),
            pull_secrets=tuple(pull_secrets),
        )
    if source.scheme == "pvc":
        assert source.claim is not None
        image = _tool(tools.copy, "pvc", source)
        mount: dict[str, Any] = {"name": "weights-source", "mountPath": SOURCE_MOUNT}
        mount["readOnly"] = True
        if source.path:
            mount["subPath"] = source.path
        return Fill(
            image=image,
            command=("/bin/sh", "-c", COPY_SCRIPT),
            env=(*common, {"name": "FROM", "value": SOURCE_MOUNT}),
            identity=(source.uri, image),
            mounts=(mount,),
            volumes=(
                {
                    "name": "weights-source",
                    "persistentVolumeClaim": {"claimName": source.claim, "readOnly": True},
                },
            ),
            pull_secrets=tuple(pull_secrets),
        )
    assert source.image is not None
    return Fill(
        image=source.image,
        command=("/bin/sh", "-c", COPY_SCRIPT),
        env=(*common, {"name": "FROM", "value": MODELCAR_DIR}),
        identity=(source.uri,),
        pull_secrets=tuple(pull_secrets),
    )


def _tool(image: str | None, scheme: str, source: WeightSource) -> str:
    if image:
        return image
    raise SpecError(
        f"{P}.source.uri",
        source.uri,
        f"{P}.source.uri: the Composition passes no image to copy {scheme}:// weights with "
        f"(input {'s3Tool' if scheme == 's3' else 'copyTool'}.image); the platform team "
        "regenerates package/ and updates the Configuration",
    )


def fill_resources() -> dict[str, Any]:
    """What a fill's container asks for (function/plan/storage.py FETCH_*)."""
    return {
        "requests": {
            "cpu": sizing.cpu_quantity(storage.FETCH_CPU_MILLICORES),
            "memory": sizing.memory_quantity(storage.FETCH_MEMORY_MIB),
        },
        "memory_limit": sizing.memory_quantity(storage.FETCH_MEMORY_LIMIT_MIB),
    }


def fill_container(
    fill: Fill,
    *,
    name: str,
    requests: Mapping[str, str],
    memory_limit: str,
    mount: str = CACHE_MOUNT,
) -> dict[str, Any]:
    """The container that runs `fill` with the cache mounted at `mount`."""
    return {
        "name": name,
        "image": fill.image,
        "command": list(fill.command),
        "env": [dict(e) for e in fill.env],
        "resources": {"requests": dict(requests), "limits": {"memory": memory_limit}},
        "volumeMounts": [{"name": "model-cache", "mountPath": mount}, *map(dict, fill.mounts)],
    }


def fill_for(spec: LLMSpec, image: str, python: str, secrets: Secrets, inputs: Inputs) -> Fill:
    """How this claim's caches fill: from its source, else the Hub with the engine `image`'s
    `python`."""
    if spec.source is None:
        return hub_fill(spec, image, python, secrets.hf_token, secrets.pull)
    tools = Tools(s3=inputs.s3_tool_image, copy=inputs.copy_tool_image)
    return source_fill(spec.source, tools, secrets.source_env, secrets.pull)
