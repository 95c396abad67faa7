"""Secrets travel by reference only: the Secrets a model's pods read (as name and key on the
target), and which may be copied to another cluster (only plain ones, never a cluster's
credentials)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from function.claim.spec import SecretRef, SpecError
from function.cluster.target import Target
from function.outcome import Inputs, Outcome
from function.policy import credentials


@dataclass(frozen=True)
class Secrets:
    """The Secrets the pods on the target read, as (name, key) there: the originals on the
    control plane, or each model's own copies on another cluster. None: none (or not yet
    copied)."""

    hf_token: tuple[str, str] | None
    api_key: tuple[str, str] | None
    # engine.env's variables read from Secrets: (variable, (Secret, key)) on the target.
    engine_env: tuple[tuple[str, tuple[str, str]], ...] = ()
    # engine.imagePullSecrets, by name on the target.
    pull: tuple[str, ...] = ()
    # spec.parameters.source's S3 access key, as the download reads it: (variable, (Secret,
    # key)) on the target.
    source_env: tuple[tuple[str, tuple[str, str]], ...] = ()


# Secret types that may be copied to another cluster: only plain (Opaque) ones, never a
# service account token, a registry credential or a Crossplane connection secret.
_COPYABLE_TYPES = (None, "", "Opaque")
# ...except a registry credential named in engine.imagePullSecrets, which is one: the type
# the kubelet reads and its one key (k8s.io/api core/v1 SecretTypeDockerConfigJson).
PULL_SECRET_TYPE = "kubernetes.io/dockerconfigjson"
PULL_SECRET_KEY = ".dockerconfigjson"


def secret_problem(
    ref: SecretRef,
    field: str,
    found: dict[str, Any],
    target: Target,
    owners: dict[str, str] | None = None,
    pull: bool = False,
) -> str | None:
    """Why the Secret `ref` may not be copied to another cluster, or None. `owners`: the
    namespace's credential Secrets and whose they are (function/policy/credentials.py).
    `pull`: an image pull Secret (of PULL_SECRET_TYPE) rather than a plain one."""
    kind = found.get("type")
    where = f"Secret {found.get('metadata', {}).get('namespace', '')}/{ref.name}"
    owner = (owners or {}).get(ref.name) or (
        f"InferenceCluster {target.cluster}" if ref.name in target.credential_secrets else None
    )
    if owner is not None:
        return (
            f"{field}: {where} holds the credentials of {owner}; a cluster's credentials are "
            "never copied to a cluster. Put the token in a Secret of its own"
        )
    if pull and kind != PULL_SECRET_TYPE:
        return (
            f"{field}: {where} is of type {kind or 'Opaque'}; an image pull Secret is of type "
            f"{PULL_SECRET_TYPE} (kubectl create secret docker-registry)"
        )
    if not pull and kind not in _COPYABLE_TYPES:
        return (
            f"{field}: {where} is of type {kind}; only Opaque Secrets are copied to another "
            "cluster. Put the token in an Opaque Secret (kubectl create secret generic)"
        )
    data = {**(found.get("data") or {}), **(found.get("stringData") or {})}
    if ref.key not in data:
        return f"{field}: {where} has no key {ref.key!r}; set {field}.key to one it has"
    return None


def fetch_copyable(
    ref: SecretRef,
    field: str,
    requirement: str,
    namespace: str,
    target: Target,
    inputs: Inputs,
    out: Outcome,
    without: str,
    pull: bool = False,
) -> dict[str, Any] | None:
    """The Secret `ref` of the claim's `namespace`, asked of Crossplane as `requirement`, once
    fetched and fit to copy to `target` (a SpecError naming `field` otherwise); None while it
    is being fetched, or missing (a warning says what goes `without` it). Every credential
    Secret of the namespace is asked for beside it, and none of them is copied."""
    out.requirements[requirement] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "matchName": ref.name,
        "namespace": namespace,
    }
    out.requirements.update(credentials.requirements(namespace))
    owners = credentials.owners(inputs.required, namespace)
    if requirement not in inputs.required or owners is None:
        return None  # Crossplane fetches them and calls again
    found = inputs.required[requirement]
    if not found:
        out.warnings.append(
            f"{field}: Secret {namespace}/{ref.name} does not exist; create it with the key "
            f"{ref.key!r} ({without})"
        )
        return None
    problem = secret_problem(ref, field, found[0], target, owners, pull)
    if problem:
        raise SpecError(field, ref.name, problem)
    return found[0]
