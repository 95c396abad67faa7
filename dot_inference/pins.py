"""Read a pinned version where it is written: `kcl/versions.k` (charts, images, Crossplane
packages, each under a `# renovate:` comment) or `devbox.json` (the end-to-end tools).

A pin is named `<file>:<name>`, for example `kcl/versions.k:provider_aws` or
`devbox.json:kind`; a bare name means kcl/versions.k. `dot-inference pin NAME` prints one
(Taskfile uses it, so a version is never written twice).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = "kcl/versions.k"
DEVBOX = "devbox.json"


class PinError(Exception):
    """The pin is not written where its name says."""


def _versions_k(root: Path, name: str) -> str:
    text = (root / VERSIONS).read_text(encoding="utf-8")
    m = re.search(rf'^{re.escape(name)}\s*=\s*"([^"]*)"\s*$', text, re.MULTILINE)
    if not m:
        raise PinError(f'{VERSIONS} has no `{name} = "..."`')
    return m.group(1)


def devbox_packages(root: Path = ROOT) -> dict[str, str]:
    """{package: version} of devbox.json's `packages` (the `name@version` list or the map)."""
    data = json.loads((root / DEVBOX).read_text(encoding="utf-8"))
    packages = data.get("packages") or []
    if isinstance(packages, dict):
        return {
            k: (v.get("version", "") if isinstance(v, dict) else str(v))
            for k, v in packages.items()
        }
    out = {}
    for entry in packages:
        name, _, version = str(entry).partition("@")
        out[name] = version
    return out


def pin(ref: str, root: Path = ROOT) -> str:
    """The version `ref` (`[<file>:]<name>`) pins."""
    where, _, name = ref.rpartition(":")
    where = where or VERSIONS
    if where == VERSIONS:
        return _versions_k(root, name)
    if where == DEVBOX:
        packages = devbox_packages(root)
        if name not in packages:
            raise PinError(f"{DEVBOX} lists no package {name!r} (it has {sorted(packages)})")
        return packages[name]
    raise PinError(f"{ref!r}: pins are read from {VERSIONS} or {DEVBOX}")


def same_version(a: str, b: str) -> bool:
    """Equal versions, whether or not written with a leading `v` (charts drop it, tags keep
    it: KEDA's chart 2.20.2 is the release v2.20.2)."""
    return tag_version(a) == tag_version(b)


def tag_version(tag: str) -> str:
    """The version a tag names: without a leading `v`, and without the chart's name that a
    repository of several charts prefixes its tags with (prometheus-community/helm-charts tags
    chart 88.5.3 `kube-prometheus-stack-88.5.3`)."""
    return re.sub(r"^.*-(?=v?\d+\.)", "", tag).removeprefix("v")
