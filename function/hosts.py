"""Host and address rules every part of the function reads: whether a host is an IP literal,
the host a URL names, and whether a name is public DNS.

It imports nothing of the function, so the claim's parser, tenancy and placement all read it
without importing one another.

A public DNS name is one under a suffix of the Public Suffix List, read through the
maintained `publicsuffixlist` package (its bundled copy of the list, pinned in
pyproject.toml), never a hand list. A pod's resolver reads a name whose last label is no
public suffix through its search list (`kubernetes.default`, `x.monitoring`, `svc.cluster`
are Services there), so such a name is never public, whatever its letters.
"""

from __future__ import annotations

import functools
import re

# An IPv4 literal's last label is all digits; a DNS name's top-level label never is. Gateway
# API forbids IPs in `hostnames` and Kubernetes in an Ingress rule's `host`, though neither
# pattern can tell them from names. Every notation the resolver accepts (127.1, 2130706433,
# 0177.0.0.1, 0x7f.0.0.1) ends in digits.
_NUMERIC_LAST_LABEL = re.compile(r"(^|\.)[0-9]+$")

# Special-use names the Public Suffix List still lists (IANA's Special-Use Domain Names
# registry): .arpa is infrastructure (home.arpa, RFC 8375, is a home network's; in-addr.arpa
# and ip6.arpa name addresses), .onion is no DNS name at all (RFC 7686). The rest of that
# registry (.local, .localhost, .internal, .test, .example, .invalid, .alt) is not on the list,
# so the suffix check refuses it.
_SPECIAL_USE = (".arpa", ".onion")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")


def ip_literal(host: str) -> bool:
    return bool(_NUMERIC_LAST_LABEL.search(host))


def url_host(url: str | None) -> str | None:
    """The host of an http(s) URL, or None; a Service's in-cluster name (`*.svc`,
    `*.svc.cluster.local`) is nobody's public host."""
    m = re.match(r"^https?://([^/:]+)", url or "")
    host = m.group(1) if m else None
    return None if host is None or host.endswith((".svc", ".svc.cluster.local")) else host


@functools.cache
def _suffixes() -> object:
    # accept_unknown=False: a last label the list does not have (a namespace, `cluster`,
    # `svc`, `local`) is no suffix, instead of the list's implicit `*` rule that would make
    # any label one.
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList(accept_unknown=False)


def public_dns_name(host: str) -> bool:
    """Whether `host` (lower case) is a name in public DNS: a DNS name of two labels or more,
    no IP literal in any notation, no special-use name, and more than a public suffix (a
    registrable domain or a name under one: `api.together.xyz`, `x.github.io`; never
    `co.uk` itself)."""
    if len(host) > 253 or not _DNS_NAME.match(host) or ip_literal(host):
        return False
    if host.endswith(_SPECIAL_USE):
        return False
    return _suffixes().privatesuffix(host) is not None  # type: ignore[attr-defined]
