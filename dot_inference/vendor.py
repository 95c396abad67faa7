"""The upstream schemas vendored in `schemas/`: where each folder comes from, whether it still
matches its pin, and re-vendoring it from upstream.

Each folder holds unmodified upstream files (CRDs, JSON schemas) and a `SOURCE` (YAML): the
repository, the tag, the 40-hex commit the files were taken from, the path inside the
repository, the pins it must match (`kcl/versions.k:<name>` or `devbox.json:<package>`) and,
per file, its git blob id (`git hash-object`), so that anyone can check a file against
upstream with `git rev-parse <commit>:<path>/<file>` and a test can tell an edited copy.

`dot-inference vendor` (`./task vendor`) re-vendors every folder whose pin moved (Renovate
bumps kcl/versions.k; this fetches the same files at the new tag), `dot-inference vendor
FOLDER` one folder, `--check` only reports.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from dot_inference import pins

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = "schemas"
SOURCE = "SOURCE"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
HEADER = (
    "# Unmodified upstream files: where they come from and the git blob id of each.\n"
    "# Written by `./task vendor` (dot_inference/vendor.py); tests check every field.\n"
)


class VendorError(Exception):
    """A SOURCE that cannot be read, or upstream that does not have what it names."""


@dataclass(frozen=True)
class OtherCommit:
    """A file taken from another commit than the folder's."""

    commit: str
    note: str


@dataclass(frozen=True)
class Source:
    folder: str  # the folder's name under schemas/
    repository: str  # owner/name on GitHub
    commit: str
    path: str  # the folder inside the repository the files are relative to
    pins: tuple[str, ...]
    files: dict[str, str]  # path relative to `path` (and to the folder) -> git blob id
    tag: str = ""  # the release; empty for a commit pin
    # For a commit pin, the branch it follows. Beside a tag, the branch the files were taken
    # from instead of the tag's commit (equal to the tag's but for what `note` says).
    ref: str = ""
    note: str = ""
    exceptions: dict[str, OtherCommit] = field(default_factory=dict)

    @property
    def off_release(self) -> list[str]:
        """What of the folder is not the release's own copy: the whole folder when it was
        taken from a branch beside its tag, else the files taken from another commit."""
        if self.tag and self.ref:
            return [f"all files ({self.ref} at {self.commit[:12]})"]
        return [f"{f} ({e.commit[:12]})" for f, e in sorted(self.exceptions.items())]

    @property
    def release(self) -> str:
        """What the pins must equal: the tag, or the commit for a commit pin."""
        return self.tag or self.commit

    def to_yaml(self) -> str:
        data: dict[str, object] = {"repository": self.repository}
        if self.tag:
            data["tag"] = self.tag
        if self.ref:
            data["ref"] = self.ref
        data |= {"commit": self.commit, "path": self.path, "pins": list(self.pins)}
        if self.note:
            data["note"] = self.note
        data["files"] = dict(sorted(self.files.items()))
        if self.exceptions:
            data["exceptions"] = {
                f: {"commit": e.commit, "note": e.note} for f, e in sorted(self.exceptions.items())
            }
        return HEADER + yaml.safe_dump(data, sort_keys=False, width=100)


def blob_id(data: bytes) -> str:
    """The id git gives this content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _shown(path: Path) -> str:
    """A path as messages print it: relative to the repository when inside it."""
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


def folders(base: Path = ROOT / SCHEMAS) -> list[str]:
    """The vendored folders under `base` (the repository's schemas/)."""
    return sorted(p.parent.name for p in base.glob(f"*/{SOURCE}"))


def load(folder: str, base: Path = ROOT / SCHEMAS) -> Source:
    path = base / folder / SOURCE
    where = _shown(path)
    if not path.is_file():
        raise VendorError(f"{where} is missing")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise VendorError(f"{where}: {e}") from e
    if not isinstance(data, dict):
        raise VendorError(f"{where}: not a YAML mapping")
    missing = [k for k in ("repository", "commit", "path", "pins", "files") if not data.get(k)]
    if missing:
        raise VendorError(f"{where}: missing {', '.join(missing)}")
    if not data.get("tag") and not data.get("ref"):
        raise VendorError(f"{where}: needs `tag` (a release) or `ref` (a branch, commit pin)")
    commit = str(data["commit"])
    exceptions = {
        str(f): OtherCommit(str(e.get("commit", "")), str(e.get("note", "")))
        for f, e in (data.get("exceptions") or {}).items()
    }
    for commit_ in [commit, *(e.commit for e in exceptions.values())]:
        if not _COMMIT.match(commit_):
            raise VendorError(f"{where}: {commit_!r} is not a 40-hex commit")
    return Source(
        folder=folder,
        repository=str(data["repository"]),
        commit=commit,
        path=str(data["path"]),
        pins=tuple(str(p) for p in data["pins"]),
        files={str(k): str(v) for k, v in data["files"].items()},
        tag=str(data.get("tag") or ""),
        ref=str(data.get("ref") or ""),
        note=str(data.get("note") or ""),
        exceptions=exceptions,
    )


def revendor_hint(folder: str) -> str:
    return f"re-vendor with `./task vendor -- {folder}` and commit {SCHEMAS}/{folder}"


def _pin_values(source: Source, root: Path) -> dict[str, str]:
    return {ref: pins.pin(ref, root) for ref in source.pins}


def _disagree(values: dict[str, str]) -> str | None:
    """A message when one folder's pins name different releases (one provider family's
    packages are released together, and their CRDs are one folder)."""
    if len({v.removeprefix("v") for v in values.values()}) <= 1:
        return None
    listed = ", ".join(f"{ref} = {v}" for ref, v in values.items())
    return f"these pins share one vendored folder and must move together: {listed}"


def pin_problems(source: Source, root: Path = ROOT) -> list[str]:
    """Each pin of the folder that names another release than the files are of."""
    try:
        values = _pin_values(source, root)
    except (OSError, pins.PinError) as e:
        return [f"{SCHEMAS}/{source.folder}: {e}"]
    if (message := _disagree(values)) is not None:
        return [f"{SCHEMAS}/{source.folder}: {message}; then {revendor_hint(source.folder)}"]
    out = []
    for ref, value in values.items():
        same = value == source.commit if not source.tag else pins.same_version(value, source.tag)
        if not same:
            out.append(
                f"{ref} is {value}, but {SCHEMAS}/{source.folder} holds {source.repository} "
                f"{source.release} (commit {source.commit[:12]}): {revendor_hint(source.folder)}"
            )
    return out


def file_problems(source: Source, schemas: Path = ROOT / SCHEMAS) -> list[str]:
    """Files that are missing, edited since vendoring, or not listed in SOURCE."""
    base = schemas / source.folder
    out = []
    for rel, blob in sorted(source.files.items()):
        path = base / rel
        if not path.is_file():
            out.append(
                f"{SCHEMAS}/{source.folder}/{rel} is missing: {revendor_hint(source.folder)}"
            )
        elif blob_id(path.read_bytes()) != blob:
            out.append(
                f"{SCHEMAS}/{source.folder}/{rel} differs from upstream (blob {blob[:12]}): "
                f"vendored files are never edited; undo the edit with `git checkout -- "
                f"{SCHEMAS}/{source.folder}/{rel}`"
            )
    listed = {*source.files, SOURCE}
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        rel = path.relative_to(base).as_posix()
        if rel not in listed:
            out.append(f"{SCHEMAS}/{source.folder}/{rel} is not listed in its SOURCE")
    return out


def problems(root: Path = ROOT, names: list[str] | None = None) -> list[str]:
    out = []
    for folder in names or folders(root / SCHEMAS):
        source = load(folder, root / SCHEMAS)
        out += pin_problems(source, root) + file_problems(source, root / SCHEMAS)
    return out


def wanted(source: Source, root: Path = ROOT) -> str:
    """The tag (or commit) the folder's pins ask for, spelt as the repository tags."""
    values = _pin_values(source, root)
    if (message := _disagree(values)) is not None:
        raise VendorError(f"{SCHEMAS}/{source.folder}: {message}")
    value = next(iter(values.values()))
    if not source.tag:
        return value
    # A chart's name before the version (`kube-prometheus-stack-88.5.3`) stays.
    prefix = source.tag[: len(source.tag) - len(pins.tag_version(source.tag))].removesuffix("v")
    if value.startswith("v") or not source.tag.removeprefix(prefix).startswith("v"):
        return prefix + value
    return f"{prefix}v{value}"


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    if proc.returncode != 0:
        raise VendorError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
    return proc


def revendor(folder: str, root: Path = ROOT, git_url: str | None = None) -> Source:
    """Fetch the folder's files at the release its pin names and rewrite the folder.

    The same files (paths relative to SOURCE's `path`) are taken from the new release, whole
    and unmodified; a file the release no longer has is an error naming it."""
    old = load(folder, root / SCHEMAS)
    release = wanted(old, root)
    commit_pin = bool(_COMMIT.match(release))
    url = git_url or f"https://github.com/{old.repository}.git"
    with tempfile.TemporaryDirectory(prefix="dot-inference-vendor-") as tmp:
        repo = Path(tmp)
        _git(repo, "init", "--quiet")
        _git(repo, "remote", "add", "origin", url)
        # Trees only; each file's blob is fetched when read (a provider's CRD folder is large).
        _git(repo, "config", "remote.origin.promisor", "true")
        _git(repo, "config", "remote.origin.partialclonefilter", "blob:none")
        refspec = release if commit_pin else f"refs/tags/{release}"
        _git(repo, "fetch", "--quiet", "--depth", "1", "--filter=blob:none", "origin", refspec)
        commit = _git(repo, "rev-parse", "FETCH_HEAD^{commit}").stdout.decode().strip()
        contents: dict[str, bytes] = {}
        for rel in sorted(old.files):
            upstream = f"{old.path}/{rel}"
            try:
                contents[rel] = _git(repo, "show", f"{commit}:{upstream}").stdout
            except VendorError as e:
                raise VendorError(
                    f"{old.repository} {release} has no {upstream} (listed in "
                    f"{SCHEMAS}/{folder}/{SOURCE}): the file moved or was removed upstream; "
                    f"change SOURCE's `files` or `path` to where it is now"
                ) from e
    base = root / SCHEMAS / folder
    shutil.rmtree(base)
    base.mkdir(parents=True)
    for rel, data in contents.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(data)
    new = Source(
        folder=folder,
        repository=old.repository,
        commit=commit,
        path=old.path,
        pins=old.pins,
        files={rel: blob_id(data) for rel, data in contents.items()},
        tag="" if commit_pin else release,
        # A commit pin keeps its branch and why it is one; a release is the tag's own copy.
        ref=old.ref if commit_pin else "",
        note=old.note if commit_pin else "",
    )
    (base / SOURCE).write_text(new.to_yaml(), encoding="utf-8")
    return new


def vendor(
    names: list[str], root: Path = ROOT, git_url: str | None = None, check: bool = False
) -> tuple[int, list[str]]:
    """`dot-inference vendor`: (exit code, lines to print)."""
    known = folders(root / SCHEMAS)
    unknown = [n for n in names if n not in known]
    if unknown:
        return 2, [f"no {SCHEMAS}/<folder>/{SOURCE} for {', '.join(unknown)} (known: {known})"]
    if check:
        found = problems(root, names)
        if found:
            return 1, found
        checked = names or known
        lines = [f"{len(checked)} vendored folders match their pins"]
        for folder in checked:
            off = load(folder, root / SCHEMAS).off_release
            if off:
                lines.append(
                    f"  {SCHEMAS}/{folder}: not the release's own copy: {', '.join(off)} "
                    f"(its SOURCE says why; `./task vendor -- {folder}` takes the release's)"
                )
        return 0, lines
    if git_url and len(names) != 1:
        return 2, ["--git-url needs exactly one folder"]
    todo = names or [f for f in known if pin_problems(load(f, root / SCHEMAS), root)]
    lines = []
    for folder in todo:
        try:
            new = revendor(folder, root, git_url)
        except (VendorError, pins.PinError, OSError) as e:
            return 1, [*lines, f"{folder}: {e}"]
        lines.append(
            f"{SCHEMAS}/{folder}: {new.repository} {new.release} ({new.commit[:12]}), "
            f"{len(new.files)} files"
        )
    return 0, lines or ["every vendored folder already matches its pin"]
