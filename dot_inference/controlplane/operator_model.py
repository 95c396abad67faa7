"""The production-stack operator's model (dot_inference/production_stack_operator.py) run as a
controller against the plane, where the operator itself cannot be built: its go.mod names the
module `production-stack`, which no module proxy serves.

    python -m dot_inference.controlplane.operator_model --kubeconfig-dir DIR

Each pass, for every VLLMRuntime: the Deployment the operator creates when there is none
(owned by the VLLMRuntime, as `SetControllerReference` makes it), replaced when
`deploymentNeedsUpdate` says so, and the status `updateStatus` writes from the Deployment's
status. Where the operator would panic or the API server would refuse its update, the model
logs what and leaves the object as the operator leaves it (no status written). A status is
written only when it changes (the operator's `lastUpdated` aside), as a watch-driven
controller would settle.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from dot_inference import production_stack_operator as operator
from dot_inference.controlplane.kube import Kube, KubeError

API = "production-stack.vllm.ai/v1alpha1"
KIND = "VLLMRuntime"


def log(message: str) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
    print(f"{stamp} operator-model: {message}", flush=True)


def owned(deployment: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
    meta = runtime["metadata"]
    deployment["metadata"]["ownerReferences"] = [
        {
            "apiVersion": API,
            "kind": KIND,
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return deployment


def status_of(deployment: dict[str, Any]) -> dict[str, Any]:
    s = deployment.get("status") or {}
    replicas = int(deployment["spec"].get("replicas") or 0)
    out = operator.status_for(
        int(s.get("availableReplicas") or 0),
        replicas=replicas,
        updated=int(s.get("updatedReplicas") or 0),
        unavailable=int(s.get("unavailableReplicas") or 0),
    )
    selector = deployment["spec"]["selector"]["matchLabels"]
    out["selector"] = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return out


def reconcile(kube: Kube, runtime: dict[str, Any]) -> None:
    meta = runtime["metadata"]
    if meta.get("deletionTimestamp"):
        return
    ns, name = meta["namespace"], meta["name"]
    # The Service, then the claim, each created when absent (Reconcile's order).
    for api, made in (("v1", operator.service_for(runtime)), ("v1", operator.pvc_for(runtime))):
        if made is not None and kube.get(api, made["kind"], name, ns) is None:
            kube.create(owned(made, runtime))
            log(f"created {made['kind']} {ns}/{name}")
    found = kube.get("apps/v1", "Deployment", name, ns)
    try:
        if found is None:
            found = kube.create(owned(operator.deployment_for(runtime), runtime))
            log(f"created Deployment {ns}/{name}")
        elif operator.deployment_needs_update(found, runtime):
            new = operator.reconcile(found, runtime)
            new = owned(new, runtime)
            new["metadata"]["resourceVersion"] = found["metadata"]["resourceVersion"]
            found = kube.request("PUT", kube.path("apps/v1", "Deployment", ns, name), new)
            log(f"updated Deployment {ns}/{name}")
    except operator.ControllerPanic as err:
        log(f"{ns}/{name}: the operator panics here: {err}")
        return
    except operator.UpdateRejected as err:
        log(f"{ns}/{name}: the API server refuses the operator's update: {err}")
        return
    status = status_of(found)
    old = {k: v for k, v in (runtime.get("status") or {}).items() if k != "lastUpdated"}
    if old != {k: v for k, v in status.items() if k != "lastUpdated"}:
        status["lastUpdated"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        # Merge patch: the fields the operator leaves out (zero counts) are removed.
        kube.patch_status(runtime, {**{k: None for k in old}, **status})
        log(f"status of {ns}/{name}: {status['modelStatus']}")


def reconcile_all(kube: Kube) -> None:
    """One pass over every VLLMRuntime. One object's error never stops the pass: it is logged
    with where it happened, and every other runtime is still served."""
    try:
        runtimes = kube.list(API, KIND)
    except (KubeError, OSError) as err:
        log(f"listing VLLMRuntimes: {err}")
        return
    for runtime in runtimes:
        meta = runtime.get("metadata") or {}
        try:
            reconcile(kube, runtime)
        except KubeError as err:
            log(f"{meta.get('name')}: {err.message}")
        except Exception as err:
            where = traceback.extract_tb(err.__traceback__)[-1]
            log(
                f"{meta.get('namespace')}/{meta.get('name')}: {type(err).__name__}: {err} "
                f"({where.filename}:{where.lineno})"
            )


def run(kube: Kube, interval: float) -> None:
    while True:
        reconcile_all(kube)
        time.sleep(interval)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--pki", required=True, type=Path, help="ca.crt, admin.crt, admin.key")
    parser.add_argument("--interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    pki = args.pki
    kube = Kube(args.server, pki / "ca.crt", pki / "admin.crt", pki / "admin.key")
    log(f"watching {KIND}s at {args.server}")
    try:
        run(kube, args.interval)
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
