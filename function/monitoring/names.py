"""What may go into PromQL, a URL or a label: checked, never taken as given.

Every value a query carries is a Kubernetes name the function composed (a DNS label), so a
query is built only from names that match a DNS label; nothing from the claim enters PromQL
as text (a latency target is a number, formatted by the function)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from function.claim.fields import P, SpecError, short

# RFC 1123 DNS label, what Kubernetes allows for a namespace or an object's name.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# A label key (optional DNS-subdomain prefix and a name) and value (kubernetes
# apimachinery validation: qualified name, label value: 63 characters of [A-Za-z0-9-_.]).
_LABEL_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def dns_label(value: object) -> bool:
    return isinstance(value, str) and bool(_DNS_LABEL.fullmatch(value))


def valid_label(key: object, value: object) -> bool:
    return (
        isinstance(key, str)
        and isinstance(value, str)
        and bool(_LABEL_NAME.fullmatch(key))
        and bool(_LABEL_VALUE.fullmatch(value))
    )


def valid_url(value: object) -> bool:
    """An http(s) URL with a host and nothing that could break out of a string (quotes,
    spaces, control characters)."""
    if not isinstance(value, str) or not value or len(value) > 2048:
        return False
    if any(c in value for c in "\"'`\\ {}") or not value.isprintable():
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def selector(namespace: str, model: str) -> str:
    """The PromQL label matcher of one model's engine series: the labels the cluster's
    PodMonitor puts on every vLLM series (`namespace`, `model` = the engine pods'
    app.kubernetes.io/name; docs/inferencecluster.md). Refuses (SpecError) anything that is
    not a DNS label, so no value can close the string: the namespace may come from the
    cluster's status (its router's namespace), which no schema checked."""
    if not dns_label(namespace):
        raise SpecError(
            f"{P}.targetNamespace",
            namespace,
            f"{P}.targetNamespace: the model's namespace {short(namespace)} is not a DNS label, "
            "so no Prometheus query can select its engines; set targetNamespace to a "
            "namespace name (lower-case letters, digits, '-', at most 63)",
        )
    if not dns_label(model):
        raise SpecError(
            "metadata.name",
            model,
            f"metadata.name: the engine name {short(model)} is not a DNS label, so no "
            "Prometheus query can select its pods; give the claim a DNS-label name",
        )
    return f'namespace="{namespace}",model="{model}"'
