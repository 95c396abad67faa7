"""Where the control plane lives and what every part of it reads first: the checkout, the state
folder, the loopback ports, its names, and the two probes (an HTTP 200, a TCP port open). It
imports nothing of the plane, so plane.py and controllers.py both read it."""

from __future__ import annotations

from pathlib import Path

from dot_inference.controlplane import build

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".control-plane"

# Loopback ports. provider-kubernetes v1.2.1 binds :8080 (metrics) and :9443 (webhooks) with
# no flag to move them, so nothing else takes those two.
PORTS = {
    "etcd-client": 23790,
    "etcd-peer": 23800,
    "etcd-metrics": 23810,
    "apiserver": 16443,
    "controller-manager": 10257,
    "scheduler": 10259,
    "kwok": 10247,
    "crossplane-metrics": 18080,
    "crossplane-health": 18081,
    "crossplane-webhook": 18443,
    "provider-kubernetes-health": 18091,
    "provider-kubernetes-webhook": 9443,
    "provider-helm-webhook": 18444,
    "provider-helm-metrics": 18082,
    "provider-helm-health": 18092,
    "function-auto-ready": 19441,
    "function-dot-inference": 19442,
    "function-kcl": 19443,
    "lws-webhook": 19450,
    "lws-metrics": 19451,
    "lws-health": 19452,
    "keda-metrics": 19460,
    "keda-health": 19461,
    "keda-grpc": 19462,
}
CROSSPLANE_NAMESPACE = "crossplane-system"
# The ServiceAccount provider-kubernetes runs as (its in-cluster identity: a ProviderConfig with
# InjectedIdentity, which local InferenceClusters compose, acts as it).
PROVIDER_SA = "provider-kubernetes"
SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def say(message: str) -> None:
    build.say(message)


def http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as rsp:
            return rsp.status == 200
    except OSError:
        return False


def tcp_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0
