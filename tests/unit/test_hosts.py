"""Host rules (function/hosts.py): IP literals in every notation, a URL's public host, and
public DNS names as the Public Suffix List has them."""

from __future__ import annotations

import pytest

from function import hosts


@pytest.mark.parametrize(
    ("host", "ip"),
    [
        ("10.0.0.5", True),
        ("127.0.0.1", True),
        ("127.1", True),  # inet_aton's short forms
        ("2130706433", True),
        ("0177.0.0.1", True),
        ("0x7f.0.0.1", True),
        ("localhost", False),
        ("qwen.127.0.0.1.nip.io", False),
        ("llm.example.com", False),
        ("a.b.c.123", True),
        ("x1.example.co", False),
    ],
)
def test_ip_literals(host: str, ip: bool) -> None:
    assert hosts.ip_literal(host) is ip


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://llm.example.com", "llm.example.com"),
        ("https://llm.example.com:8443/v1", "llm.example.com"),
        ("http://vllm-router.a-team.svc.cluster.local", None),
        ("", None),
        (None, None),
    ],
)
def test_a_router_endpoint_s_public_host(url: str | None, host: str | None) -> None:
    assert hosts.url_host(url) == host


@pytest.mark.parametrize(
    ("host", "public"),
    [
        # Names the resolver's search list turns into Services: the last label is a
        # namespace, `svc` or `cluster`, none of them a public suffix.
        ("kubernetes.default", False),
        ("x.monitoring", False),
        ("svc.cluster", False),
        ("qwen.b-team", False),
        ("vault.vault.svc.cluster.local", False),
        ("kubernetes.default.svc", False),
        # Special-use names, listed or not (RFC 6761, 6762, 7686, 8375; ICANN's .internal).
        ("metadata.google.internal", False),
        ("printer.local", False),
        ("x.localhost", False),
        ("router.home.arpa", False),
        ("1.0.0.127.in-addr.arpa", False),
        ("abc.onion", False),
        ("x.test", False),
        ("x.example", False),
        ("x.invalid", False),
        # Single labels, bare suffixes, IPs in every notation.
        ("localhost", False),
        ("kubernetes", False),
        ("com", False),
        ("co.uk", False),
        ("169.254.169.254", False),
        ("127.1", False),
        ("0x7f.0.0.1", False),
        ("::1", False),
        ("0x7f000001", False),
        ("1.0x7f", False),
        # Public names: a registrable domain or under one, the list's private section too.
        ("api.together.xyz", True),
        ("api.openai.com", True),
        ("api.groq.com", True),
        ("models.example.co.uk", True),
        ("a.co.uk", True),
        ("team.github.io", True),
        ("xn--80ak6aa92e.com", True),
    ],
)
def test_public_dns_names_follow_the_public_suffix_list(host: str, public: bool) -> None:
    assert hosts.public_dns_name(host) is public
