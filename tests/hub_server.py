"""A recorded Hugging Face Hub on loopback: what `huggingface_hub` asks for, answered from
tests/contract/testdata/hub/*.yaml (one model each, rebuilt from public copies; see each
file's `sources`). The function's Hub client reaches it through HF_ENDPOINT, as it would reach
a company mirror. No test touches the network.

Routes (the ones huggingface_hub (0.36, the pinned one) uses for what function/model/hub.py asks):
- GET /api/models/<org>/<name>[/revision/<rev>]: the model info (sha, gated, pipeline tag,
  safetensors metadata, siblings with sizes);
- HEAD and GET /<org>/<name>/resolve/<rev>/<file>: a file, with the X-Repo-Commit and ETag
  headers hf_hub_download needs.
Errors carry the Hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound,
GatedRepo), which huggingface_hub turns into its exceptions.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

RECORDED = Path(__file__).parent / "contract" / "testdata" / "hub"


def hub_model(doc: dict[str, Any]) -> Any:
    """A recorded model as function/model/hub.py hands it on (a HubModel), without the server."""
    from function.model.model_config import HubModel

    st = doc.get("safetensors") or {}
    return HubModel(
        id=doc["id"],
        sha=doc["sha"],
        gated=bool(doc.get("gated")),
        pipeline_tag=doc.get("pipeline_tag"),
        parameters=st.get("parameters") or {},
        files={s["rfilename"]: s.get("size") for s in doc["siblings"]},
        config=doc["files"]["config.json"],
    )


def recorded_models() -> dict[str, dict[str, Any]]:
    """Every recorded model: id -> its document."""
    out = {}
    for path in sorted(RECORDED.glob("*.yaml")):
        doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        out[doc["id"]] = doc
    return out


@dataclass
class Hub:
    """The server's state: the models it knows and what happened."""

    models: dict[str, dict[str, Any]]
    gated_tokens: dict[str, str] = field(default_factory=dict)  # model -> the token that may read
    delay_s: float = 0.0
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, auth
    fail_with: int | None = None  # answer every request with this status
    endpoint: str = ""


def _handler(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            return

        def _send(
            self, code: int, body: bytes = b"", headers: dict[str, str] | None = None
        ) -> None:
            self.send_response(code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, code: int, error_code: str, message: str) -> None:
            body = json.dumps({"error": message}).encode()
            self._send(
                code,
                body,
                {
                    "X-Error-Code": error_code,
                    "X-Error-Message": message,
                    "Content-Type": "application/json",
                },
            )

        def _model(self, repo: str) -> dict[str, Any] | None:
            return hub.models.get(repo)

        def _authorized(self, repo: str) -> bool:
            token = hub.gated_tokens.get(repo)
            return token is None or self.headers.get("Authorization") == f"Bearer {token}"

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            path = unquote(urlsplit(self.path).path)
            hub.requests.append((self.command, path, self.headers.get("Authorization")))
            if hub.delay_s:
                threading.Event().wait(hub.delay_s)
            if hub.fail_with:
                self._error(hub.fail_with, "", "recorded Hub told to fail")
                return
            parts = path.strip("/").split("/")
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                repo = "/".join(parts[2:4])
                revision = parts[5] if len(parts) >= 6 and parts[4] == "revision" else None
                self._info(repo, revision)
            elif len(parts) >= 5 and parts[2] == "resolve":
                self._file("/".join(parts[:2]), parts[3], "/".join(parts[4:]))
            else:
                self._error(404, "", f"no route {path}")

        def _info(self, repo: str, revision: str | None) -> None:
            model = self._model(repo)
            if model is None:
                self._error(404, "RepoNotFound", "Repository not found")
                return
            if revision not in (None, "main", model["sha"]):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            body = {
                "id": model["id"],
                "modelId": model["id"],
                "sha": model["sha"],
                "gated": "manual" if repo in hub.gated_tokens or model.get("gated") else False,
                "pipeline_tag": model.get("pipeline_tag"),
                "siblings": model["siblings"],
            }
            if model.get("safetensors"):
                body["safetensors"] = model["safetensors"]
            self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

        def _file(self, repo: str, revision: str, name: str) -> None:
            model = self._model(repo)
            if model is None:
                self._error(404, "RepoNotFound", "Repository not found")
                return
            if revision not in ("main", model["sha"]):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            if not self._authorized(repo):
                self._error(403, "GatedRepo", f"Access to model {repo} is restricted")
                return
            content = (model.get("files") or {}).get(name)
            if content is None:
                self._error(404, "EntryNotFound", f"{name} does not exist")
                return
            body = json.dumps(content, sort_keys=True).encode()
            etag = hashlib.sha256(body).hexdigest()
            self._send(
                200,
                body,
                {
                    "X-Repo-Commit": model["sha"],
                    "ETag": f'"{etag}"',
                    "Content-Type": "application/json",
                },
            )

    return Handler


@contextmanager
def serve(hub: Hub | None = None) -> Iterator[Hub]:
    """A recorded Hub on 127.0.0.1 for the duration of the block; `hub.endpoint` is its URL."""
    hub = hub or Hub(models=recorded_models())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
