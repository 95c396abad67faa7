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
from typing import ClassVar

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


class PodRouter(Router):
    """Names the pod that answered in x-inference-pod, as the inference simulator does behind
    the router: `pods` says how a request picks one (`sticky`: by the session header, as the
    router's `session` logic; `alternating`: round robin; `one`: a single replica; `none`: no
    header)."""

    pods = "sticky"
    counter: ClassVar[list[int]] = [0]

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        session = self.headers.get("x-session-id", "")
        self.counter[0] += 1
        pod = {
            "sticky": f"pod-{sorted(['s1', 's2', 's3']).index(session) % 2 if session else 0}",
            "alternating": f"pod-{self.counter[0] % 2}",
            "one": "pod-0",
        }.get(self.pods)
        if pod is not None and self.command == "POST":
            self.send_header(openai_client.POD_HEADER, pod)
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def pod_router(request: pytest.FixtureRequest) -> Iterator[str]:
    handler = type("P", (PodRouter,), {**ALL, "pods": request.param, "counter": [0]})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize(
    ("pod_router", "problem"),
    [
        ("sticky", None),
        ("alternating", "session s1 moved between pods ['pod-0', 'pod-1']"),
        ("one", "every session landed on pod-0: stickiness not shown"),
        ("none", "session s1: a response without x-inference-pod"),
    ],
    indirect=["pod_router"],
    ids=["sticky sessions", "round robin", "one replica", "no pod header"],
)
def test_sessions_stay_on_one_pod(pod_router: str, problem: str | None) -> None:
    seen, problems = openai_client.sessions(pod_router, "a/b", "x-session-id", 3, 3)
    assert sorted(seen) == ["s1", "s2", "s3"] and all(len(p) == 3 for p in seen.values())
    assert problems[:1] == ([problem] if problem else [])


@pytest.mark.parametrize("pod_router", ["sticky"], indirect=True)
def test_sessions_run_as_the_job_runs_it(pod_router: str) -> None:
    source = (SCRIPTS / "openai_client.py").read_text()
    run = subprocess.run(
        [sys.executable, "-c", source, "sessions", pod_router, "a/b", "x-session-id", "3", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "s1: pod-0, pod-0" in run.stdout and "s2: pod-1, pod-1" in run.stdout
