"""How soon Crossplane runs the function again: the response's `meta.ttl`.

Facts, from Crossplane at our pin (v2.3.4):

- The XR reconciler requeues an XR after the shortest non-zero TTL its pipeline's functions
  return (`internal/controller/apiextensions/composite/reconciler.go`, `RequeueAfter:
  res.TTL`, with realtime compositions on, their default). function-sdk-python's default is
  one minute, as is Crossplane's `--poll-interval`.
- Between those, watch events on the composed resources reconcile the XR at once, unless its
  watch circuit breaker is open (`internal/circuit/token_bucket.go`: a burst of 50 updates,
  then one every 2 s; open for 5 minutes, letting one event through every 30 s). The XR then
  says so: condition `Responsive`, status False, reason `WatchCircuitOpen`.

Two waits would then last the minute, as nothing else runs the function again:

- **On the cluster.** A claim reads its InferenceCluster as a required resource, which
  Crossplane fetches and never watches (`composition_functions.go`). While the cluster exists
  but is not ready for models (condition `Cluster` False, `NotReady`: its status not published,
  or its models' identity not ready, function/cluster/target.py), the function asks to be run
  again soon, so the model follows within seconds of its cluster.
- **While Crossplane drops the claim's events.** A claim composes a dozen objects, each
  updated a few times as they come up, so creating one opens its circuit (on the plane, every
  claim's and cluster's did). Its composition goes in steps that each wait on what the last
  made (the cache claim before the engine that mounts it, the download before the replicas),
  and with events dropped each step waits for a probe or the poll (crossplane/crossplane#7703
  is the same loss). While the circuit is open and the claim is not yet done, the function
  asks to be run again soon.

Soon is 10 s: a fifth of the rate the breaker itself allows, well below what it guards
against, and no fight (an unchanged desired state writes nothing). A cluster that never
becomes ready keeps its models' function called every 10 s: one cheap call per waiting model.
"""

from __future__ import annotations

from typing import Any

from function.kube import dig
from function.outcome import Outcome

# The SDK's default and Crossplane's poll interval: what a settled claim keeps.
SETTLED_SECONDS = 60
# While the cluster is not ready for models, or the watch circuit is open and something
# composed is not yet ready.
SOON_SECONDS = 10


def circuit_open(xr: dict[str, Any]) -> bool:
    """Whether Crossplane is dropping the XR's watch events (Responsive=False,
    WatchCircuitOpen)."""
    conditions = dig(xr, "status", "conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict)
        and c.get("type") == "Responsive"
        and c.get("status") == "False"
        and c.get("reason") == "WatchCircuitOpen"
        for c in conditions
    )


def settled(out: Outcome) -> bool:
    """Nothing left to wait for: a refused claim, or everything composed is ready."""
    if out.fatal is not None:
        return True
    return out.xr_ready is not False and all(out.ready.get(k) for k in out.resources)


def waiting_on_cluster(out: Outcome) -> bool:
    """The claim's cluster exists but is not ready for models (function/cluster/resolve.py)."""
    return any(c.type == "Cluster" and c.reason == "NotReady" for c in out.conditions)


def ttl_seconds(xr: dict[str, Any], out: Outcome) -> int:
    """How soon the function asks to be run again."""
    if waiting_on_cluster(out) or (circuit_open(xr) and not settled(out)):
        return SOON_SECONDS
    return SETTLED_SECONDS
