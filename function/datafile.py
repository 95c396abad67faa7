"""The function's own data files (catalog, GPU table, vLLM and simulator flags, llm-d
profiles): YAML this repository writes, read with libyaml's parser where PyYAML has it
(ten times faster than the pure-Python one; these files are trusted, unlike a claim)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
