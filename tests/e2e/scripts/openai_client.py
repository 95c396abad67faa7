"""An OpenAI-API client for the e2e suites, run on the cluster (standard library only).

    python3 openai_client.py routes <base URL> <model name>... [--host <Host header>]
    python3 openai_client.py load <base URL> <model name> <seconds> <concurrency>
    python3 openai_client.py sessions <base URL> <model name> <session header> <sessions> <requests>

`routes` checks an endpoint that serves several models: GET /v1/models lists every name
given, and a chat completion naming each one is answered by that model (the router routes
by the request's `model`). `load` keeps `concurrency` chat completions for one model in
flight for `seconds`, so that its engines queue requests and KEDA adds replicas; it prints
how many were answered and fails if none was. `sessions` sends `requests` chat completions
for each of `sessions` sessions (the header set to s1, s2, ...) and reads which pod answered
each (the inference simulator names its pod in the response header x-inference-pod, which the
router passes on): every session must stay on one pod (the router's `session` logic), and with
several replicas the sessions must not all land on one (else nothing was shown).

The local suite runs it in a Job with the router's own image (python:3.12-slim based), read
from the live router Deployment, so no image is pinned here: tests/e2e/local/chainsaw-test.yaml.
tests/e2e/test_openai_client.py runs it offline against a stand-in server.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 60


def _call(
    base: str, path: str, body: dict[str, Any] | None = None, host: str | None = None
) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base.rstrip("/") + path, data=data)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if host:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def chat(base: str, model: str, host: str | None = None) -> tuple[int, Any]:
    return _call(
        base,
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 16},
        host,
    )


def routes(base: str, names: list[str], host: str | None = None) -> list[str]:
    """Problems with `base` serving `names` (empty: it does)."""
    problems = []
    status, listing = _call(base, "/v1/models", host=host)
    if status != 200 or not isinstance(listing, dict):
        return [f"GET /v1/models: HTTP {status}: {listing}"]
    listed = {m.get("id") for m in listing.get("data", []) if isinstance(m, dict)}
    problems += [
        f"/v1/models does not list {n} (it lists {sorted(listed)})"
        for n in names
        if n not in listed
    ]
    for name in names:
        status, answer = chat(base, name, host)
        if status != 200:
            problems.append(f"chat completion for {name}: HTTP {status}: {answer}")
        elif not isinstance(answer, dict) or not answer.get("choices"):
            problems.append(f"chat completion for {name}: no choices in {answer}")
    return problems


POD_HEADER = "x-inference-pod"


def pod_of(base: str, model: str, header: str, session: str) -> tuple[int, str | None]:
    """(HTTP status, the pod that answered) for one chat completion in `session`."""
    body = {"model": model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4}
    request = urllib.request.Request(
        base.rstrip("/") + "/v1/chat/completions", data=json.dumps(body).encode()
    )
    request.add_header("Content-Type", "application/json")
    request.add_header(header, session)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read()
            return response.status, response.headers.get(POD_HEADER)
    except urllib.error.HTTPError as e:
        return e.code, None


def sessions(
    base: str, model: str, header: str, count: int, requests: int
) -> tuple[dict[str, list[str | None]], list[str]]:
    """({session: pods that answered, in order}, problems) for `count` sessions."""
    seen: dict[str, list[str | None]] = {}
    problems = []
    for i in range(1, count + 1):
        session = f"s{i}"
        for _ in range(requests):
            status, pod = pod_of(base, model, header, session)
            if status != 200:
                problems.append(f"session {session}: HTTP {status}")
            seen.setdefault(session, []).append(pod)
    for session, pods in seen.items():
        if None in pods:
            problems.append(f"session {session}: a response without {POD_HEADER}")
        elif len(set(pods)) > 1:
            problems.append(f"session {session} moved between pods {sorted(set(pods))}")
    answered = {p for pods in seen.values() for p in pods if p}
    if count > 1 and len(answered) == 1 and not problems:
        problems.append(f"every session landed on {answered.pop()}: stickiness not shown")
    return seen, problems


def load(base: str, model: str, seconds: float, concurrency: int) -> tuple[int, int]:
    """(answered, failed) chat completions while `concurrency` workers ask for `seconds`."""
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def worker() -> None:
        while time.monotonic() < deadline:
            try:
                status, _ = chat(base, model)
            except OSError:
                status = 0
            with lock:
                counts["ok" if status == 200 else "failed"] += 1

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts["ok"], counts["failed"]


def main(argv: list[str]) -> int:
    host = None
    if "--host" in argv:
        i = argv.index("--host")
        host = argv[i + 1]
        argv = argv[:i] + argv[i + 2 :]
    if len(argv) >= 3 and argv[0] == "routes":
        problems = routes(argv[1], argv[2:], host)
        for p in problems:
            print(p, file=sys.stderr)
        if not problems:
            print(f"{argv[1]} serves {', '.join(argv[2:])}")
        return 1 if problems else 0
    if len(argv) == 5 and argv[0] == "load":
        ok, failed = load(argv[1], argv[2], float(argv[3]), int(argv[4]))
        print(f"{ok} answered, {failed} failed")
        return 0 if ok else 1
    if len(argv) == 6 and argv[0] == "sessions":
        seen, problems = sessions(argv[1], argv[2], argv[3], int(argv[4]), int(argv[5]))
        for session, pods in seen.items():
            print(f"{session}: {', '.join(str(p) for p in pods)}")
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
