"""The e2e suites' OpenAI client (tests/e2e/scripts/openai_client.py), offline, against a
stand-in router on loopback: it passes what serves every name, and names what does not.

It runs on the cluster as `python3 -c "<source>" <arguments>` (scripts/openai-job.sh); the
last test runs it exactly so."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
import openai_client  # noqa: E402


class Router(BaseHTTPRequestHandler):
    """Serves `models`; answers chat completions for a listed name, 404 otherwise (as the
    production-stack router does); `host`, when set, must be the Host header."""

    models: tuple[str, ...] = ()
    broken: tuple[str, ...] = ()  # listed, but their completions fail (503)
    host: str | None = None

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _host_ok(self) -> bool:
        if self.host and self.headers.get("Host") != self.host:
            self._send(404, {"error": "no such host"})
            return False
        return True

    def do_GET(self) -> None:
        if not self._host_ok():
            return
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": m} for m in self.models]})
        else:
            self._send(404, {})

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body.get("model")
        if model in self.broken:
            self._send(503, {"error": f"Model '{model}' is temporarily unavailable."})
        elif model in self.models:
            self._send(200, {"model": model, "choices": [{"message": {"content": "hi"}}]})
        else:
            self._send(404, {"error": f"Model '{model}' not found."})


@pytest.fixture
def router(request: pytest.FixtureRequest) -> Iterator[str]:
    config = getattr(request, "param", {})
    handler = type("R", (Router,), config)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


ALL = {"models": ("a/b", "alias-b", "c/d", "alias-d")}


@pytest.mark.parametrize(
    ("router", "names", "host", "problems"),
    [
        (ALL, ["a/b", "alias-b", "c/d", "alias-d"], None, []),
        (
            {"models": ("a/b",)},
            ["a/b", "c/d"],
            None,
            [
                "/v1/models does not list c/d (it lists ['a/b'])",
                "chat completion for c/d: HTTP 404",
            ],
        ),
        (
            {**ALL, "broken": ("c/d",)},
            ["a/b", "c/d"],
            None,
            ["chat completion for c/d: HTTP 503"],
        ),
        ({**ALL, "host": "llm.example.com"}, ["a/b"], "llm.example.com", []),
        (
            {**ALL, "host": "llm.example.com"},
            ["a/b"],
            None,
            ["GET /v1/models: HTTP 404"],
        ),
    ],
    indirect=["router"],
    ids=["every name", "a model missing", "a model failing", "by host", "wrong host"],
)
def test_routes(router: str, names: list[str], host: str | None, problems: list[str]) -> None:
    found = openai_client.routes(router, names, host)
    assert len(found) == len(problems), found
    for got, start in zip(found, problems, strict=True):
        assert got.startswith(start), got


@pytest.mark.parametrize("router", [ALL], indirect=True)
def test_load_counts_answers(router: str) -> None:
    ok, failed = openai_client.load(router, "a/b", 0.1, 3)
    assert ok > 0 and failed == 0
    ok, failed = openai_client.load(router, "x/y", 0.05, 2)
    assert ok == 0 and failed > 0


@pytest.mark.parametrize("router", [ALL], indirect=True)
def test_runs_as_the_job_runs_it(router: str) -> None:
    source = (SCRIPTS / "openai_client.py").read_text()
    run = subprocess.run(
        [sys.executable, "-c", source, "routes", router, "a/b", "alias-d"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "serves a/b, alias-d" in run.stdout
    missing = subprocess.run(
        [sys.executable, "-c", source, "routes", router, "nope/model"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 1 and "does not list nope/model" in missing.stderr
    usage = subprocess.run([sys.executable, "-c", source], capture_output=True, timeout=60)
    assert usage.returncode == 2
