"""A small client for the control plane's API server: discovery, server-side apply, get,
list, delete, status patches. Certificates from the plane's PKI; JSON in and out."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIELD_MANAGER = "dot-inference-control-plane"


class KubeError(Exception):
    def __init__(self, status: int, body: dict[str, Any] | str) -> None:
        self.status = status
        self.body = body
        message = body.get("message", "") if isinstance(body, dict) else str(body)
        super().__init__(f"{status}: {message}")

    @property
    def message(self) -> str:
        return self.body.get("message", "") if isinstance(self.body, dict) else str(self.body)


@dataclass(frozen=True)
class Resource:
    group_version: str
    plural: str
    namespaced: bool


class Kube:
    def __init__(self, server: str, ca: Path, cert: Path, key: Path) -> None:
        self.server = server.rstrip("/")
        self.context = ssl.create_default_context(cafile=str(ca))
        self.context.load_cert_chain(str(cert), str(key))
        self._resources: dict[tuple[str, str], Resource] = {}

    # --- HTTP ----------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        timeout: float = 30,
    ) -> Any:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = (
            None
            if body is None
            else (body if isinstance(body, bytes) else json.dumps(body).encode())
        )
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.context, timeout=timeout) as rsp:
                raw = rsp.read()
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = raw.decode(errors="replace")
            raise KubeError(err.code, parsed) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:  # /readyz and the like answer in text
            return raw.decode(errors="replace")

    def ready(self) -> bool:
        try:
            self.request("GET", "/readyz", timeout=2)
            return True
        except (OSError, KubeError, ValueError):
            return False

    # --- discovery -----------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Resource:
        key = (api_version, kind)
        if key not in self._resources:
            self._discover(api_version)
        if key not in self._resources:
            self._discover(api_version, refresh=True)
        if key not in self._resources:
            raise KubeError(404, f"the server has no {kind} in {api_version}")
        return self._resources[key]

    def _discover(self, api_version: str, refresh: bool = False) -> None:
        path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        try:
            listing = self.request("GET", path)
        except KubeError as err:
            if err.status == 404:
                return
            raise
        for r in listing.get("resources", []):
            if "/" in r["name"]:
                continue
            self._resources[(api_version, r["kind"])] = Resource(
                api_version, r["name"], bool(r["namespaced"])
            )

    def forget(self) -> None:
        """Discovery again on next use (after CRDs were added)."""
        self._resources.clear()

    def path(self, api_version: str, kind: str, namespace: str | None, name: str = "") -> str:
        r = self.resource(api_version, kind)
        base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        ns = f"/namespaces/{namespace}" if r.namespaced and namespace else ""
        return f"{base}{ns}/{r.plural}" + (f"/{name}" if name else "")

    # --- objects ---------------------------------------------------------------------------

    def apply(self, obj: dict[str, Any], *, force: bool = True, dry_run: bool = False) -> Any:
        """Server-side apply, as `kubectl apply --server-side` does."""
        meta = obj.get("metadata") or {}
        query = {"fieldManager": FIELD_MANAGER, "force": "true" if force else "false"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request(
            "PATCH",
            self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]),
            json.dumps(obj).encode(),
            content_type="application/apply-patch+yaml",
            query=query,
        )

    def create(self, obj: dict[str, Any]) -> Any:
        meta = obj.get("metadata") or {}
        return self.request(
            "POST", self.path(obj["apiVersion"], obj["kind"], meta.get("namespace")), obj
        )

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        try:
            return self.request("GET", self.path(api_version, kind, namespace, name))
        except KubeError as err:
            if err.status == 404:
                return None
            raise

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, selector: str = ""
    ) -> list[dict[str, Any]]:
        query = {"labelSelector": selector} if selector else None
        try:
            items = self.request("GET", self.path(api_version, kind, namespace), query=query)
        except KubeError as err:
            if err.status == 404:
                return []
            raise
        kind_of = kind
        for item in items.get("items", []):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind_of)
        return items.get("items", [])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Ask for deletion (background propagation); False when it is already gone."""
        try:
            self.request(
                "DELETE",
                self.path(api_version, kind, namespace, name),
                {"propagationPolicy": "Background"},
            )
            return True
        except KubeError as err:
            if err.status == 404:
                return False
            raise

    def patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: dict[str, Any]
    ) -> Any:
        """A JSON merge patch (`kubectl patch --type=merge`): a null removes the field."""
        return self.request(
            "PATCH",
            self.path(api_version, kind, namespace, name),
            patch,
            content_type="application/merge-patch+json",
        )

    def patch_status(self, obj: dict[str, Any], status: dict[str, Any]) -> Any:
        meta = obj["metadata"]
        return self.request(
            "PATCH",
            self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
            + "/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )


def wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll `check` until it returns something true; TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    c = condition(obj, type_)
    return bool(c) and c.get("status") == "True"


def documents(objs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if isinstance(o, dict) and o.get("kind")]
