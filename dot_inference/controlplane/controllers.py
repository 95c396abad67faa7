"""The controllers that turn what Crossplane composes into pods, started beside the plane, out
of cluster, each with its kubeconfig:

- the LeaderWorkerSet controller, with its webhooks (certificates from the plane's PKI);
- KEDA's operator, which turns a ScaledObject into its HorizontalPodAutoscaler;
- the production-stack operator's model (operator_model.py), for VLLMRuntimes;
- what a GPU cluster has that a bare plane lacks: a default StorageClass (Kubernetes' own
  hostPath provisioner, in kube-controller-manager) for the model caches, and the `nvidia`
  RuntimeClass that the GPU operator creates and VLLMRuntime pods name;
- the relay that lets in-cluster kubeconfigs reach the API server (relay.py).
"""

from __future__ import annotations

import base64
import copy
import socket
import sys
from pathlib import Path
from typing import Any

import yaml

from dot_inference.controlplane import build, install
from dot_inference.controlplane.kube import Kube

KEDA_NAMESPACE = "keda"
RELAY_PORT = 443
# The StorageClass a cluster without one gets (kube-controller-manager's hostPath provisioner,
# `--enable-hostpath-provisioner`: volumes are directories under /tmp of this machine).
STORAGE_CLASS = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "standard",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": "kubernetes.io/host-path",
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "Immediate",
}
# The RuntimeClass the NVIDIA GPU operator creates (its container toolkit's `nvidia` handler);
# the production-stack operator names it in every engine pod (its CRD's default).
RUNTIME_CLASS = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "nvidia"},
    "handler": "nvidia",
}


def scheduler_config(run: Path, kubeconfig: Path) -> Path:
    """kube-scheduler's configuration: its defaults, but the GPU bin-packing of Kubernetes'
    "Resource Bin Packing" (NodeResourcesFit, MostAllocated, nvidia.com/gpu weighed above CPU
    and memory), as GPU clusters run it: small models fill a node before the next, so a
    whole node stays free for a model that needs all its GPUs. (The default, LeastAllocated
    over CPU and memory, spreads them, and leaves every node a GPU short.)"""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [
                                    {"name": "nvidia.com/gpu", "weight": 5},
                                    {"name": "cpu", "weight": 1},
                                    {"name": "memory", "weight": 1},
                                ],
                            }
                        },
                    }
                ],
            }
        ],
    }
    run.mkdir(parents=True, exist_ok=True)
    path = run / "kube-scheduler-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cluster_basics(kube: Kube) -> None:
    kube.apply(STORAGE_CLASS)
    kube.apply(RUNTIME_CLASS)


def can_listen(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# --- LeaderWorkerSet ---------------------------------------------------------------------


def lws_webhooks(source: Path, url: str, ca: bytes) -> list[dict[str, Any]]:
    """config/webhook of the LWS module with its kustomize patches (the pod webhooks only
    for pods of a LeaderWorkerSet), each hook pointed at `url` instead of the Service."""
    base = source / "config" / "webhook"
    configs = install.load([base / "manifests.yaml"])
    patches = {
        "MutatingWebhookConfiguration": base / "mutating-patch.yaml",
        "ValidatingWebhookConfiguration": base / "validating-patch.yaml",
    }
    out = []
    for config in configs:
        config = copy.deepcopy(config)
        patch = patches.get(config["kind"])
        for op in yaml.safe_load(patch.read_text()) if patch and patch.is_file() else []:
            index = int(op["path"].rsplit("/", 1)[1])
            if op["op"] == "replace":
                config["webhooks"][index] = op["value"]
        config["metadata"]["name"] = "lws-" + config["metadata"]["name"]
        for hook in config["webhooks"]:
            path = hook["clientConfig"].get("service", {}).get("path", "")
            hook["clientConfig"] = {"url": url + path, "caBundle": base64.b64encode(ca).decode()}
        out.append(config)
    return out


def lws_config(webhook_port: int, metrics: int, health: int, cert_dir: Path) -> dict[str, Any]:
    """The controller's Configuration (api/config/v1alpha1): no leader election, no internal
    certificate management (the plane's PKI serves the webhooks), loopback addresses."""
    return {
        "apiVersion": "config.lws.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health}"},
    }


def start_lws(plane: Any, kube: Kube, binary: Path, component: build.Component) -> None:
    from dot_inference.controlplane.where import PORTS, http_ok, say

    say(f"starting the LeaderWorkerSet controller {component.version}")
    # Its other CRD (DisaggregatedSet, which it also watches) from its module; the
    # LeaderWorkerSet CRD is the pinned release's (schemas/lws, installed with the package).
    others = [
        c
        for c in install.crds([build.source(component) / "config" / "crd" / "bases"])
        if c["spec"]["names"]["kind"] != "LeaderWorkerSet"
    ]
    install.install_crds(kube, others)
    certs = plane.pki.tls_dir("lws", "loopback")
    config = plane.root / "run" / "lws-config.yaml"
    config.write_text(
        yaml.safe_dump(
            lws_config(PORTS["lws-webhook"], PORTS["lws-metrics"], PORTS["lws-health"], certs)
        )
    )
    kubeconfig = plane.pki.kubeconfig(plane.root / "lws.kubeconfig", "crossplane", plane.server)
    plane._start(
        "lws-controller", [str(binary), f"--config={config}"], env={"KUBECONFIG": str(kubeconfig)}
    )
    plane._wait(
        "lws-controller",
        lambda: http_ok(f"http://127.0.0.1:{PORTS['lws-health']}/readyz"),
        60,
        "LeaderWorkerSet controller ready",
    )
    url = f"https://127.0.0.1:{PORTS['lws-webhook']}"
    for hook in lws_webhooks(build.source(component), url, plane.pki.path("ca.crt").read_bytes()):
        kube.apply(hook)


# --- KEDA ------------------------------------------------------------------------------------


def start_keda(plane: Any, kube: Kube, bins: dict[str, Path], component: build.Component) -> None:
    from dot_inference.controlplane.where import PORTS, http_ok, say

    say(f"starting KEDA's operator {component.version}")
    install.namespace(kube, KEDA_NAMESPACE)
    install.install_crds(kube, install.crds([build.source(component) / "config" / "crd" / "bases"]))
    kubeconfig = plane.pki.kubeconfig(plane.root / "keda.kubeconfig", "crossplane", plane.server)
    env = {
        "KUBECONFIG": str(kubeconfig),
        "WATCH_NAMESPACE": "",
        "POD_NAMESPACE": KEDA_NAMESPACE,
        "KEDA_CLUSTER_OBJECT_NAMESPACE": KEDA_NAMESPACE,
    }
    plane._start(
        "keda-operator",
        [
            str(bins["keda"]),
            f"--metrics-bind-address=127.0.0.1:{PORTS['keda-metrics']}",
            f"--health-probe-bind-address=127.0.0.1:{PORTS['keda-health']}",
            f"--metrics-service-bind-address=127.0.0.1:{PORTS['keda-grpc']}",
            f"--cert-dir={plane.pki.tls_dir('keda', 'loopback')}",
            "--enable-cert-rotation=false",
            "--enable-webhook-patching=false",
            "--enable-apiservice-patching=false",
            "--leader-elect=false",
        ],
        env=env,
    )
    plane._wait(
        "keda-operator",
        lambda: http_ok(f"http://127.0.0.1:{PORTS['keda-health']}/readyz"),
        90,
        "KEDA's operator ready",
    )


# --- the production-stack operator's model ---------------------------------------------------


def start_operator_model(plane: Any) -> None:
    from dot_inference.controlplane.where import ROOT, say

    say("starting the production-stack operator's model (VLLMRuntime -> Deployment, status)")
    plane._start(
        "operator-model",
        [
            sys.executable,
            "-m",
            "dot_inference.controlplane.operator_model",
            f"--server={plane.server}",
            f"--pki={plane.pki.root}",
        ],
        env={"PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )


# --- the relay --------------------------------------------------------------------------------


def start_relay(plane: Any) -> Path | None:
    """The relay on :443 and the hosts file provider-kubernetes' mount namespace takes; None
    where port 443 cannot be had (in-cluster kubeconfigs then cannot connect: a gap)."""
    from dot_inference.controlplane.where import PORTS, ROOT

    if not can_listen(RELAY_PORT):
        return None
    plane._start(
        "relay",
        [
            sys.executable,
            "-m",
            "dot_inference.controlplane.relay",
            f"--listen=127.0.0.1:{RELAY_PORT}",
            f"--to=127.0.0.1:{PORTS['apiserver']}",
        ],
        env={"PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    from dot_inference.controlplane.relay import hosts_file

    hosts = plane.root / "run" / "hosts"
    hosts.write_text(hosts_file(Path("/etc/hosts").read_text()))
    return hosts
