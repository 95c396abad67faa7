"""The control plane's processes: started in their own session (they outlive the command
that starts them), each logging to `.control-plane/logs/<name>.log`, recorded in
`.control-plane/run/<order>-<name>.pid`, and stopped in the reverse order."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is not alive.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


class Processes:
    def __init__(self, root: Path) -> None:
        self.run = root / "run"
        self.logs = root / "logs"

    def _pidfiles(self) -> list[Path]:
        return sorted(self.run.glob("*.pid")) if self.run.is_dir() else []

    def pids(self) -> dict[str, int]:
        out = {}
        for f in self._pidfiles():
            try:
                out[f.stem.split("-", 1)[1]] = int(f.read_text())
            except (ValueError, IndexError):
                continue
        return out

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        self.run.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        order = len(self._pidfiles())
        with open(self.log(name), "ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
        (self.run / f"{order:02d}-{name}.pid").write_text(str(proc.pid))
        return proc.pid

    def check(self, name: str) -> None:
        """RuntimeError with the end of its log when `name` has exited."""
        pid = self.pids().get(name)
        if pid is not None and not alive(pid):
            tail = self.log(name).read_text(errors="replace").splitlines()[-15:]
            raise RuntimeError(f"{name} exited; the end of {self.log(name)}:\n" + "\n".join(tail))

    def stop_all(self, timeout: float = 15) -> list[str]:
        """Stop every process, newest first (SIGTERM to its session, then SIGKILL)."""
        stopped = []
        for f in reversed(self._pidfiles()):
            try:
                pid = int(f.read_text())
            except ValueError:
                f.unlink()
                continue
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                stopped.append(f.stem.split("-", 1)[1])
            f.unlink()
        return stopped
