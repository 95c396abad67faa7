"""The upstream schemas in schemas/ are what runs: each folder names its repository, tag and
commit, matches the pin the project installs, holds its files unmodified, and holds only what
the project uses. Re-vendoring after a bump is one command (`./task vendor`), exercised here
against a local git repository standing in for upstream.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXAMPLES, PACKAGE, ROOT, load_yaml
from setup import manifests

from dot_inference import pins, vendor
from dot_inference.crossplane import documents, render

FOLDERS = vendor.folders()
SCHEMAS = ROOT / "schemas"
FUNCTION_PACKAGE = ROOT / "function" / "package"


def test_every_folder_of_schemas_has_a_source() -> None:
    assert set(FOLDERS) == {p.name for p in SCHEMAS.iterdir() if p.is_dir()}
    assert {"crossplane", "production-stack", "provider-upjet-aws", "chainsaw"} <= set(FOLDERS)


def test_only_the_known_folders_hold_copies_other_than_their_releases() -> None:
    """Two folders started from copies taken off their tag (each SOURCE says why); no other
    may, and `vendor --check` names them every time."""
    off = {f: vendor.load(f).off_release for f in FOLDERS if vendor.load(f).off_release}
    assert set(off) == {"gateway-api-inference-extension", "provider-upjet-aws"}
    assert off["gateway-api-inference-extension"] == ["all files (main at 84436a96b9e6)"]
    assert len(off["provider-upjet-aws"]) == 3
    code, lines = vendor.vendor([], check=True)
    assert code == 0
    assert [ln.split(":")[0].strip() for ln in lines[1:]] == [f"schemas/{f}" for f in sorted(off)]


@pytest.mark.parametrize("folder", FOLDERS)
def test_source_names_repository_tag_commit_and_path(folder: str) -> None:
    source = vendor.load(folder)
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source.repository)
    assert re.fullmatch(r"[0-9a-f]{40}", source.commit)
    assert source.tag or source.ref, "a release tag, or the branch a commit pin follows"
    assert source.path and not source.path.startswith("/")
    assert source.files and source.pins
    for name, other in source.exceptions.items():
        assert name in source.files
        assert other.commit != source.commit and other.note, name


@pytest.mark.parametrize("folder", FOLDERS)
def test_folder_matches_its_pin(folder: str) -> None:
    assert vendor.pin_problems(vendor.load(folder)) == []


@pytest.mark.parametrize("folder", FOLDERS)
def test_files_are_unmodified_upstream_copies(folder: str) -> None:
    assert vendor.file_problems(vendor.load(folder)) == []


def _project_copy(tmp_path: Path) -> Path:
    """A project root with the pins and the vendored schemas, to change without harm."""
    root = tmp_path / "project"
    (root / "kcl").mkdir(parents=True)
    shutil.copy(ROOT / "kcl" / "versions.k", root / "kcl" / "versions.k")
    shutil.copy(ROOT / "devbox.json", root / "devbox.json")
    shutil.copytree(SCHEMAS, root / "schemas")
    return root


@pytest.mark.parametrize(
    ("pin_file", "name", "folder"),
    [
        ("kcl/versions.k", "provider_helm", "provider-helm"),
        ("kcl/versions.k", "keda", "keda"),
        ("kcl/versions.k", "agentgateway", "agentgateway"),
        ("kcl/versions.k", "production_stack_operator", "production-stack"),
        ("devbox.json", "kyverno-chainsaw", "chainsaw"),
    ],
)
def test_a_bump_without_revendoring_fails_and_says_how(
    tmp_path: Path, pin_file: str, name: str, folder: str
) -> None:
    root = _project_copy(tmp_path)
    path = root / pin_file
    old = pins.pin(f"{pin_file}:{name}", root)
    new = "a" * 40 if len(old) == 40 else "v9.9.9" if old.startswith("v") else "9.9.9"
    written = f'{name} = "{old}"' if pin_file.endswith(".k") else f'"{name}@{old}"'
    assert written in path.read_text()
    path.write_text(path.read_text().replace(written, written.replace(old, new)))
    problems = vendor.pin_problems(vendor.load(folder, root / "schemas"), root)
    assert len(problems) == 1
    assert f"{pin_file}:{name} is {new}" in problems[0]
    assert f"./task vendor -- {folder}" in problems[0]
    code, lines = vendor.vendor([], root=root, check=True)
    assert code == 1 and lines == problems


def test_an_edited_or_extra_file_is_caught(tmp_path: Path) -> None:
    root = _project_copy(tmp_path)
    base = root / "schemas" / "keda"
    crd = base / "keda.sh_scaledobjects.yaml"
    crd.write_text(crd.read_text().replace("maxReplicaCount", "maxReplicas", 1))
    (base / "extra.yaml").write_text("kind: Nothing\n")
    problems = vendor.file_problems(vendor.load("keda", root / "schemas"), root / "schemas")
    assert len(problems) == 2, problems
    assert "keda.sh_scaledobjects.yaml differs from upstream" in problems[0]
    assert "git checkout -- schemas/keda/keda.sh_scaledobjects.yaml" in problems[0]
    assert "keda/extra.yaml is not listed in its SOURCE" in problems[1]


def _bump(root: Path, names: list[str], new: str) -> None:
    path = root / "kcl" / "versions.k"
    text = path.read_text()
    for name in names:
        old = pins.pin(name, root)
        text = text.replace(f'{name} = "{old}"', f'{name} = "{new}"')
    path.write_text(text)


def test_pins_sharing_a_folder_must_move_together(tmp_path: Path) -> None:
    """One provider family's packages are released together and their CRDs are one folder:
    bumping one of them is refused with the others named, and re-vendoring waits for all."""
    root = _project_copy(tmp_path)
    _bump(root, ["provider_aws_ec2"], "v2.7.0")
    source = vendor.load("provider-upjet-aws", root / "schemas")
    [problem] = vendor.pin_problems(source, root)
    assert "must move together" in problem
    assert "kcl/versions.k:provider_aws = v2.6.0" in problem
    assert "kcl/versions.k:provider_aws_ec2 = v2.7.0" in problem
    with pytest.raises(vendor.VendorError, match="must move together"):
        vendor.wanted(source, root)
    _bump(root, ["provider_aws", "provider_aws_iam", "provider_aws_efs"], "v2.7.0")
    problems = vendor.pin_problems(source, root)
    assert len(problems) == 4 and all("./task vendor -- provider-upjet-aws" in p for p in problems)
    assert vendor.wanted(source, root) == "v2.7.0"


def test_blob_ids_are_gits(tmp_path: Path) -> None:
    f = tmp_path / "x"
    f.write_bytes(b"kind: CustomResourceDefinition\n")
    out = subprocess.run(["git", "hash-object", str(f)], capture_output=True, text=True)
    assert vendor.blob_id(f.read_bytes()) == out.stdout.strip()


# --------------------------------------------------------------------------- re-vendoring


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


@pytest.fixture
def upstream(tmp_path: Path) -> Path:
    """A repository standing in for an upstream project: CRDs under config/crd/bases at
    v1.0.0 and (changed, one file more) at v1.1.0."""
    repo = tmp_path / "upstream"
    crds = repo / "config" / "crd" / "bases"
    crds.mkdir(parents=True)
    _git(repo, "init", "--quiet")
    # Serve blob-less fetches as GitHub does: revendor reads each blob on demand.
    _git(repo, "config", "uploadpack.allowFilter", "true")
    (crds / "a.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: a}\n")
    (crds / "b.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: b}\n")
    _git(repo, "add", "--all")
    _git(repo, "commit", "--quiet", "-m", "one")
    _git(repo, "tag", "v1.0.0")
    (crds / "a.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: a2}\n")
    (crds / "c.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: c}\n")
    _git(repo, "add", "--all")
    _git(repo, "commit", "--quiet", "-m", "two")
    _git(repo, "tag", "-a", "v1.1.0", "-m", "release")
    return repo


def _project(tmp_path: Path, upstream: Path, pin: str, tag: str = "v1.0.0", **source_: str) -> Path:
    root = tmp_path / "project"
    (root / "kcl").mkdir(parents=True)
    (root / "kcl" / "versions.k").write_text(f'# renovate: ...\nthing = "{pin}"\n')
    folder = root / "schemas" / "thing"
    folder.mkdir(parents=True)
    files = {}
    for name in ("a.yaml", "b.yaml"):
        data = _git(upstream, "show", f"{tag}:config/crd/bases/{name}").encode() + b"\n"
        (folder / name).write_bytes(data)
        files[name] = vendor.blob_id(data)
    source = vendor.Source(
        folder="thing",
        repository="example/thing",
        commit=_git(upstream, "rev-parse", f"{tag}^{{commit}}"),
        path="config/crd/bases",
        pins=("kcl/versions.k:thing",),
        files=files,
        tag=tag,
        **source_,
    )
    (folder / "SOURCE").write_text(source.to_yaml())
    return root


def test_revendor_takes_the_same_files_at_the_pinned_tag(tmp_path: Path, upstream: Path) -> None:
    # A chart version (the tag has a `v`), and files taken from a branch beside the tag.
    root = _project(tmp_path, upstream, pin="1.1.0", ref="main", note="taken from main")
    assert vendor.load("thing", root / "schemas").off_release
    assert vendor.problems(root)  # the pin moved, the files did not
    new = vendor.revendor("thing", root, git_url=upstream.as_uri())
    assert new.tag == "v1.1.0"
    assert (new.ref, new.note, new.off_release) == ("", "", []), "the release's own copy now"
    assert new.commit == _git(upstream, "rev-parse", "v1.1.0^{commit}")
    folder = root / "schemas" / "thing"
    assert sorted(p.name for p in folder.iterdir()) == ["SOURCE", "a.yaml", "b.yaml"]
    assert "name: a2" in (folder / "a.yaml").read_text()
    assert vendor.load("thing", root / "schemas") == new
    assert vendor.problems(root) == []


def test_revendor_names_a_file_upstream_removed(tmp_path: Path, upstream: Path) -> None:
    root = _project(tmp_path, upstream, pin="v1.1.0")
    (upstream / "config" / "crd" / "bases" / "b.yaml").unlink()
    _git(upstream, "commit", "--quiet", "-am", "drop b")
    _git(upstream, "tag", "v1.2.0")
    versions = root / "kcl" / "versions.k"
    versions.write_text(versions.read_text().replace("v1.1.0", "v1.2.0"))
    before = (root / "schemas" / "thing" / "SOURCE").read_text()
    with pytest.raises(vendor.VendorError, match=r"v1\.2\.0 has no config/crd/bases/b\.yaml"):
        vendor.revendor("thing", root, git_url=upstream.as_uri())
    assert (root / "schemas" / "thing" / "SOURCE").read_text() == before, "nothing lost"


def test_revendor_follows_a_commit_pin(tmp_path: Path, upstream: Path) -> None:
    head = _git(upstream, "rev-parse", "HEAD")
    root = _project(tmp_path, upstream, pin=head)
    source = vendor.load("thing", root / "schemas")
    as_commit_pin = vendor.Source(
        **{**source.__dict__, "tag": "", "ref": "main", "note": "why a commit pin"}
    )
    (root / "schemas" / "thing" / "SOURCE").write_text(as_commit_pin.to_yaml())
    _git(upstream, "config", "uploadpack.allowAnySHA1InWant", "true")
    new = vendor.revendor("thing", root, git_url=upstream.as_uri())
    assert (new.commit, new.tag, new.ref) == (head, "", "main")
    assert new.note == as_commit_pin.note
    assert vendor.problems(root) == []


def test_vendor_command_reports_unknown_folders() -> None:
    code, lines = vendor.vendor(["nope"], check=True)
    assert code == 2 and "nope" in lines[0]


# --------------------------------------------------------------------------- only what is used


def _used_kinds() -> set[tuple[str, str]]:
    """(API group, kind) of everything the project renders, installs or validates: every
    example's composed objects (manifests inside Objects too), package/ and the function's
    package metadata, what install/ has the platform team apply, the end-to-end control
    plane (tests/e2e/setup: runtime.yaml, and the packages and ClusterProviderConfigs
    manifests.py prints for every cloud), and the CRDs the InferenceCluster installs."""
    pkg = documents.load_package(PACKAGE)
    objects: list[dict] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        state = EXAMPLES / "state" / path.name
        required = load_yaml(state) if state.exists() else []
        for xr in load_yaml(path):
            if render.is_handled_xr(pkg, xr):
                objects += render.render_in_package(pkg, xr, required=required).composed
            else:
                objects.append(xr)
    setup = ROOT / "tests" / "e2e" / "setup"
    for path in [
        *PACKAGE.rglob("*.yaml"),
        *FUNCTION_PACKAGE.rglob("*.yaml"),
        *(ROOT / "install").glob("*.yaml"),
        setup / "runtime.yaml",
    ]:
        objects += load_yaml(path)
    clouds = {"aws", "azure", "google"}
    objects += manifests.packages(clouds) + manifests.providerconfigs(clouds)
    kinds = set()
    for obj in objects:
        if obj.get("kind") == "Object":
            kinds.add((obj["apiVersion"].rpartition("/")[0], "Object"))
            obj = obj["spec"]["forProvider"]["manifest"]
        if obj.get("kind") == "CustomResourceDefinition":
            kinds.add((obj["spec"]["group"], obj["spec"]["names"]["kind"]))
        kinds.add((str(obj.get("apiVersion", "")).rpartition("/")[0], str(obj.get("kind"))))
    # The KCL program's parameters carry the CRDs an InferenceCluster installs.
    composition = load_yaml(PACKAGE / "inferencecluster" / "composition.yaml")[0]
    params = composition["spec"]["pipeline"][0]["input"]["spec"]["params"]
    for value in params.values():
        crds = json.loads(value) if isinstance(value, str) and value.startswith("[") else value
        for crd in crds if isinstance(crds, list) else []:
            if isinstance(crd, dict) and crd.get("kind") == "CustomResourceDefinition":
                kinds.add((crd["spec"]["group"], crd["spec"]["names"]["kind"]))
    return kinds


def test_every_vendored_crd_is_one_the_project_uses() -> None:
    """Rendered, installed or validated (agentgateway's backends and policies: what a model
    spread over clusters composes on the global endpoint's cluster, llm-two-regions.yaml)."""
    used = _used_kinds()
    unused = []
    for folder in FOLDERS:
        for rel in vendor.load(folder).files:
            if not rel.endswith(".yaml"):
                continue
            for crd in load_yaml(SCHEMAS / folder / rel):
                key = (crd["spec"]["group"], crd["spec"]["names"]["kind"])
                if key not in used:
                    unused.append(f"{folder}/{rel} ({key[1]})")
    assert not unused, f"vendored but never rendered, installed or validated: {unused}"


@pytest.mark.parametrize(
    ("pin", "tag", "same", "wanted"),
    [
        pytest.param("2.20.2", "v2.20.2", True, "v2.20.2", id="v-prefixed-tag"),
        pytest.param("v1.4.1", "v1.4.1", True, "v1.4.1", id="v-prefixed-pin"),
        pytest.param(
            "88.5.3",
            "kube-prometheus-stack-88.5.3",
            True,
            "kube-prometheus-stack-88.5.3",
            id="chart-prefixed-tag",
        ),
        pytest.param("0.1.13", "vllm-stack-0.1.12", False, "vllm-stack-0.1.13", id="chart-bumped"),
        pytest.param("88.5.3", "kube-prometheus-stack-88.5.30", False, "", id="longer-version"),
    ],
)
def test_tags_of_a_repository_of_charts_name_the_chart(
    tmp_path: Path, pin: str, tag: str, same: bool, wanted: str
) -> None:
    """prometheus-community/helm-charts and production-stack tag a chart's release
    `<chart>-<version>`; the pin holds the chart's version."""
    assert pins.same_version(pin, tag) is same
    if not wanted:
        return
    (tmp_path / "kcl").mkdir()
    (tmp_path / "kcl" / "versions.k").write_text(f'thing = "{pin}"\n')
    source = vendor.Source(
        folder="thing",
        repository="o/r",
        commit="0" * 40,
        path=".",
        pins=("kcl/versions.k:thing",),
        files={},
        tag=tag,
    )
    assert vendor.wanted(source, tmp_path) == wanted
