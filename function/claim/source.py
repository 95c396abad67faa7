"""``spec.parameters.source`` -> WeightSource: where the weights come from when not the
Hugging Face Hub (an S3 bucket, a PersistentVolumeClaim of the claim's namespace, an image).

The forms are function/limits.yaml's `modelSource` (the XRD reads the same patterns). Beyond
them this module refuses what a pattern cannot: a `.` or `..` path segment, a source field
that does not apply to the scheme, an endpoint with credentials or a path. Whether an
endpoint's host may be reached is tenancy's (function/policy/weights.py), which knows the
target cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from function.claim.fields import P, SecretRef, SpecError, secret_key, secret_name, short
from function.limits import (
    IMAGE_REFERENCE,
    SOURCE_ENDPOINT,
    SOURCE_ENDPOINT_MAX_LENGTH,
    SOURCE_MAX_LENGTH,
    SOURCE_PVC,
    SOURCE_REGION,
    SOURCE_REGION_MAX_LENGTH,
    SOURCE_S3,
)

F = f"{P}.source"

# What a claim gets without source.region: AWS's global endpoint's region, from which S3
# redirects a request to the bucket's own region (botocore's S3RegionRedirector).
DEFAULT_REGION = "us-east-1"
ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"

_DOT_SEGMENT = re.compile(r"/\.\.?(/|$)")

FORMS = "s3://bucket/prefix, pvc://claim/path or oci://registry/repository:tag"


@dataclass(frozen=True)
class S3Credentials:
    """The access key's two halves, each a key of the one Secret."""

    access_key_id: SecretRef
    secret_access_key: SecretRef


@dataclass(frozen=True)
class WeightSource:
    uri: str
    scheme: str  # s3, pvc, oci
    # s3: the bucket and the key prefix ("" for the whole bucket)
    bucket: str | None = None
    prefix: str = ""
    endpoint: str | None = None
    region: str = DEFAULT_REGION
    credentials: S3Credentials | None = None
    # pvc: the claim and the directory on it ("" for its root)
    claim: str | None = None
    path: str = ""
    # oci: the image reference
    image: str | None = None

    @property
    def endpoint_host(self) -> str | None:
        """The endpoint's host as written, Service names included (hosts.url_host drops those,
        and tenancy must see them to refuse them)."""
        if self.endpoint is None:
            return None
        m = re.match(r"^https?://([^/:]+)", self.endpoint)
        return m.group(1) if m else None


def parse_source(params: dict) -> WeightSource | None:
    section = params.get("source")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise SpecError(F, section, f"{F} must be an object with uri ({FORMS})")
    uri = section.get("uri")
    if not isinstance(uri, str) or len(uri) > SOURCE_MAX_LENGTH:
        raise SpecError(f"{F}.uri", uri, f"{F}.uri: {short(uri)} is not {FORMS}")
    if _DOT_SEGMENT.search(uri):
        raise SpecError(
            f"{F}.uri",
            uri,
            f"{F}.uri: {short(uri)} has a `.` or `..` path segment; name the directory that "
            "holds the weights itself",
        )
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme != "s3":
        for key in ("endpoint", "region", "credentialsSecretRef"):
            if section.get(key) is not None:
                raise SpecError(
                    f"{F}.{key}",
                    section[key],
                    f"{F}.{key} applies to s3:// only: a pvc:// claim is read where it is, "
                    "an oci:// image is pulled with engine.imagePullSecrets",
                )
    if scheme == "s3" and SOURCE_S3.match(uri):
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        return WeightSource(
            uri=uri,
            scheme="s3",
            bucket=bucket,
            prefix=prefix.rstrip("/"),
            endpoint=_endpoint(section),
            region=_region(section),
            credentials=_credentials(section),
        )
    if scheme == "pvc" and SOURCE_PVC.match(uri):
        claim, _, path = uri.removeprefix("pvc://").partition("/")
        if len(claim) > 253:
            raise SpecError(
                f"{F}.uri", uri, f"{F}.uri: {claim[:40]}... is not a PersistentVolumeClaim name"
            )
        return WeightSource(uri=uri, scheme="pvc", claim=claim, path=path.rstrip("/"))
    if scheme == "oci" and IMAGE_REFERENCE.match(uri.removeprefix("oci://")):
        return WeightSource(uri=uri, scheme="oci", image=uri.removeprefix("oci://"))
    raise SpecError(f"{F}.uri", uri, f"{F}.uri: {short(uri)} is not {FORMS}")


def _endpoint(section: dict) -> str | None:
    value = section.get("endpoint")
    if value is None:
        return None
    f = f"{F}.endpoint"
    if isinstance(value, str) and "@" in value:
        # Never echoed: the part before @ is a password.
        raise SpecError(
            f,
            "<redacted>",
            f"{f}: the URL carries credentials (user:password@); write https://host[:port] "
            f"and put the access key in a Secret named by {F}.credentialsSecretRef",
        )
    if (
        not isinstance(value, str)
        or len(value) > SOURCE_ENDPOINT_MAX_LENGTH
        or not SOURCE_ENDPOINT.match(value)
    ):
        raise SpecError(
            f,
            value,
            f"{f}: {short(value)} is not an S3 endpoint's base URL; write "
            "https://host[:port], with no path, query or credentials (they go in "
            f"{F}.credentialsSecretRef)",
        )
    return value.rstrip("/")


def _region(section: dict) -> str:
    value = section.get("region")
    if value is None:
        return DEFAULT_REGION
    if (
        not isinstance(value, str)
        or len(value) > SOURCE_REGION_MAX_LENGTH
        or not SOURCE_REGION.match(value)
    ):
        raise SpecError(
            f"{F}.region",
            value,
            f"{F}.region: {short(value)} is not a region name, e.g. eu-central-1",
        )
    return value


def _credentials(section: dict) -> S3Credentials | None:
    ref = section.get("credentialsSecretRef")
    if ref is None:
        return None
    f = f"{F}.credentialsSecretRef"
    if not isinstance(ref, dict):
        raise SpecError(f, ref, f"{f} must be an object with name (and optionally the keys)")
    name = secret_name(ref.get("name"), f"{f}.name")
    keys = [
        SecretRef(name=name, key=secret_key(ref.get(field, default), f"{f}.{field}"))
        for field, default in (
            ("accessKeyIdKey", ACCESS_KEY_ID),
            ("secretAccessKeyKey", SECRET_ACCESS_KEY),
        )
    ]
    return S3Credentials(access_key_id=keys[0], secret_access_key=keys[1])
