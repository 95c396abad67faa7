"""kwok's fake nodes as Node objects, from nodes.yaml (the pools) and function/limits.yaml
(each GPU type's memory as nvidia-smi reports it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from function.limits import LIMITS_PATH

POOLS = Path(__file__).with_name("nodes.yaml")
FAKE = {"kwok.x-k8s.io/node": "fake"}


def _node(
    name: str, labels: dict[str, str], capacity: dict[str, str], taints: list[Any] | None = None
) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {**FAKE, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                **labels,
            },
        },
        # kwok keeps what a Node is created with: the device plugin's resource included.
        "status": {"capacity": capacity, "allocatable": capacity},
    }
    if taints:
        node["spec"] = {"taints": taints}
    return node


def nodes() -> list[dict[str, Any]]:
    pools = yaml.safe_load(POOLS.read_text())
    gpus = yaml.safe_load(LIMITS_PATH.read_text())["gpus"]
    out = [
        _node(f"cpu-{i}", {"dot-inference.dev/pool": "cpu"}, dict(pools["cpu"]["capacity"]))
        for i in range(pools["cpu"]["nodes"])
    ]
    for pool in pools["gpu"]:
        labels = {
            "dot-inference.dev/pool": f"gpu-{pool['type']}",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": pool["product"],
            "nvidia.com/gpu.family": pool["family"],
            "nvidia.com/gpu.memory": str(gpus[pool["type"]]["smiMiB"]),
            "nvidia.com/gpu.count": str(pool["gpusPerNode"]),
        }
        capacity = {
            **pool["capacity"],
            **(pool.get("extra") or {}),
            "nvidia.com/gpu": str(pool["gpusPerNode"]),
        }
        out += [
            _node(f"gpu-{pool['type']}-{i}", labels, capacity, pool.get("taints"))
            for i in range(pool["nodes"])
        ]
    return out
