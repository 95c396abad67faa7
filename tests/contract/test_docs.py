"""The documentation stays true: every relative link of the README and docs/ reaches a file
(and a heading, when it names one), every field the API pages list exists in its XRD, and
every claim the pages show is one the XRD accepts."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import PACKAGE

from dot_inference.apiserver import validate_objects

ROOT = PACKAGE.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text, fence = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            text.append(_slug(line.lstrip("#")))
    return set(text)


def _links() -> list[tuple[str, Path, str]]:
    out = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            out.append((f"{page.relative_to(ROOT)} -> {target}", page, target))
    return out


LINKS = _links()


def test_the_pages_link_to_each_other() -> None:
    assert len(LINKS) >= 10, "the README links every page, and pages link each other"


@pytest.mark.parametrize(("page", "target"), [c[1:] for c in LINKS], ids=[c[0] for c in LINKS])
def test_every_link_reaches_its_file_and_heading(page: Path, target: str) -> None:
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    assert file.exists(), f"{page.name}: {target} names no file"
    if anchor:
        assert anchor in _anchors(file), f"{page.name}: {target}: no heading with that anchor"


def test_every_page_is_linked_from_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, f"the README links no docs/{page.name}"


# --- documented fields --------------------------------------------------------------------


def _xrd_parameters(name: str) -> dict[str, Any]:
    xrd = yaml.safe_load((PACKAGE / name / "definition.yaml").read_text())
    schema = xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]["properties"]["parameters"]


def _expand(expr: str) -> list[str]:
    """`a.b{c, d{e}}` -> a.b.c, a.b.d.e; `models[]{x}` -> models[].x."""
    m = re.match(r"^([\w.\[\]]+)(?:\{(.*)\})?$", expr)
    assert m, f"not a field expression: {expr}"
    base, inner = m.group(1), m.group(2)
    if inner is None:
        return [base]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur.strip())
    return [f"{base}.{leaf}" for p in parts for leaf in _expand(p)]


def _has(schema: dict[str, Any], path: str) -> bool:
    node = schema
    for part in path.split("."):
        items = part.endswith("[]")
        part = part.removesuffix("[]")
        props = node.get("properties") or {}
        if part not in props:
            return False
        node = props[part]
        if items:
            node = node.get("items") or {}
    return True


def _documented(page: str, heading: str) -> list[str]:
    """The field expressions in the first column of the table under `heading`."""
    text = (ROOT / "docs" / page).read_text()
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    # The first table of the section: its rows run until the first line that is not one.
    lines = section.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    table = []
    for ln in lines[start:]:
        if not ln.startswith("|"):
            break
        table.append(ln)
    rows = [ln for ln in table if ln.startswith("| `")]
    return [re.match(r"^\| `([^`]+)`", ln).group(1) for ln in rows]


FIELDS = [
    (f"llminference.md:{leaf}", "llminference", leaf)
    for expr in _documented("llminference.md", "## API (`spec.parameters`)")
    for leaf in _expand(expr)
] + [
    (f"inferencecluster.md:{leaf}", "inferencecluster", leaf)
    for expr in _documented("inferencecluster.md", "## API (`spec.parameters`)")
    for leaf in _expand(expr)
]


def test_the_api_pages_document_fields() -> None:
    assert len(FIELDS) > 40


@pytest.mark.parametrize(("xrd", "field"), [c[1:] for c in FIELDS], ids=[c[0] for c in FIELDS])
def test_every_documented_field_is_in_the_xrd(xrd: str, field: str) -> None:
    assert _has(_xrd_parameters(xrd), field), f"spec.parameters.{field} is not in the {xrd} XRD"


# --- claims the pages show ----------------------------------------------------------------


def _shown_claims() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for page in PAGES:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S):
            # A block inside a list item is indented with it.
            for doc in yaml.safe_load_all(textwrap.dedent(block)):
                if isinstance(doc, dict) and doc.get("kind") in (
                    "LLMInference",
                    "InferenceCluster",
                ):
                    name = doc.get("metadata", {}).get("name", "?")
                    out.append((f"{page.name}:{doc['kind']}/{name}", doc))
    return out


CLAIMS = _shown_claims()


@pytest.mark.parametrize("claim", [c[1] for c in CLAIMS], ids=[c[0] for c in CLAIMS])
def test_every_claim_the_pages_show_is_valid(claim: dict[str, Any]) -> None:
    report = validate_objects([claim])
    assert report.invalid == [], report.invalid
