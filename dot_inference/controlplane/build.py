"""Build the control plane's programs from their Go modules, at the versions kcl/versions.k
pins, once: each component is a small wrapper module (its go.mod requires the pinned
module and says what its own go.mod cannot) built with `go build`, and the binaries are kept
in a cache keyed by the component's version and recipe, outside the checkout
(`$DOT_INFERENCE_CACHE`, default `~/.cache/dot-inference/control-plane`), where git never
sees them. A second build of the same pins is a lookup.

What the module proxy refuses cannot be built here; `build_all` says which, with the go
command's own error (a `Gap`), and builds the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dot_inference.pins import pin

# Bump when a recipe below changes: every cached binary is rebuilt.
RECIPE = "1"
CROSSPLANE_VERSION_VAR = "github.com/crossplane/crossplane-runtime/v2/pkg/version.version"
# Kubernetes' components report this build date (a fixed one: the same pins build the same
# binaries).
BUILD_DATE = "2026-01-01T00:00:00Z"
# A component named `<name>-standin` is built only where `<name>` cannot be.
STANDIN = "-standin"


def cache_root() -> Path:
    return (
        Path(
            os.environ.get("DOT_INFERENCE_CACHE")
            or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dot-inference"
        )
        / "control-plane"
    )


def say(message: str) -> None:
    print(f"control-plane: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Program:
    binary: str  # the file it is built to
    package: str  # the Go package (a main package)


@dataclass(frozen=True)
class Component:
    """One pinned Go module and the programs built from it."""

    name: str
    module: str
    version: str
    programs: tuple[Program, ...]
    # The wrapper's go.mod after its `module` line: requires, replaces, directives.
    go_mod: Callable[[], str]
    ldflags: str = ""
    notes: str = ""

    @property
    def key(self) -> str:
        text = json.dumps([RECIPE, self.name, self.module, self.version, self.ldflags])
        return f"{self.name}-{self.version}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"

    @property
    def dir(self) -> Path:
        return cache_root() / "build" / self.key

    def binary(self, name: str) -> Path:
        return self.dir / "bin" / name

    def built(self) -> bool:
        return all(self.binary(p.binary).is_file() for p in self.programs)


@dataclass
class Gap:
    """A component the module proxy cannot serve here: what, and the go command's error."""

    component: str
    version: str
    error: str


@dataclass
class Built:
    binaries: dict[str, Path] = field(default_factory=dict)
    gaps: list[Gap] = field(default_factory=list)
    components: dict[str, Component] = field(default_factory=dict)


def _go(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CGO_ENABLED": "0",
        # Keep the machine's flags (-buildvcs=false) and resolve the wrapper's requirements.
        "GOFLAGS": " ".join(f for f in [os.environ.get("GOFLAGS", ""), "-mod=mod"] if f),
    }
    return subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True)


def source(component: Component) -> Path:
    """Where the built module's source is (the module cache), for the files a program reads
    from it at run time: Crossplane's CRDs and webhook configurations, kwok's stages."""
    out = _go(["list", "-m", "-json", component.module], component.dir)
    data = json.loads(out.stdout or "{}")
    found = (data.get("Replace") or {}).get("Dir") or data.get("Dir")
    if out.returncode or not found:
        raise BuildError(out.stderr.strip() or f"{component.module} is not in the module cache")
    return Path(found)


class BuildError(Exception):
    pass


# --- the components -----------------------------------------------------------------------


def _kubernetes() -> Component:
    version = pin("kubernetes")
    staging = "v0." + version.split(".", 1)[1]  # k8s.io/api v0.35.4 is Kubernetes v1.35.4

    def go_mod() -> str:
        # k8s.io/kubernetes requires every staging module at v0.0.0 and replaces it with
        # ./staging/...: a wrapper replaces each with its published release instead.
        text = _module_go_mod("k8s.io/kubernetes", version)
        staged = sorted(
            {
                line.split()[0]
                for line in text.splitlines()
                if line.strip().startswith("k8s.io/") and line.strip().endswith(" v0.0.0")
            }
        )
        # godebug only applies from the main module: carry k8s.io/kubernetes' own.
        godebug = [line for line in text.splitlines() if line.startswith("godebug")]
        replaces = "\n".join(f"\t{m} => {m} {staging}" for m in staged)
        return (
            f"{_go_line(text)}\n\n"
            + "\n".join(godebug)
            + f"\n\nrequire k8s.io/kubernetes {version}\n\nreplace (\n{replaces}\n)\n"
        )

    minor = version.split(".")[1]
    flags = " ".join(
        f"-X {p}.gitVersion={version} -X {p}.gitMajor=1 -X {p}.gitMinor={minor} "
        f"-X {p}.gitTreeState=clean -X {p}.buildDate={BUILD_DATE}"
        for p in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")
    )
    names = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    return Component(
        "kubernetes",
        "k8s.io/kubernetes",
        version,
        tuple(Program(n, f"k8s.io/kubernetes/cmd/{n}") for n in names),
        go_mod,
        flags,
    )


def _module_go_mod(module: str, version: str) -> str:
    """The go.mod of `module` at `version`, from the module proxy (the go command's error
    when it cannot be had)."""
    out = _go(["mod", "download", "-json", f"{module}@{version}"], Path.cwd())
    data = json.loads(out.stdout or "{}")
    if not data.get("GoMod"):
        raise BuildError(data.get("Error") or out.stderr.strip())
    return Path(data["GoMod"]).read_text()


def _go_line(go_mod: str) -> str:
    """A go.mod's `go` directive: the wrapper takes the built module's own, which is at least
    that of every module it requires (the go command keeps it so since Go 1.21)."""
    return next((ln for ln in go_mod.splitlines() if ln.startswith("go ")), "go 1.21")


def _version_replaces(go_mod: str) -> str:
    """A go.mod's replace directives that name a module version (not a local directory)."""
    lines, inside = [], False
    for raw in go_mod.splitlines():
        line = raw.split("//", 1)[0].strip()
        if line.startswith("replace ("):
            inside = True
            continue
        if inside and line == ")":
            inside = False
            continue
        body = line[len("replace ") :] if line.startswith("replace ") else line if inside else ""
        if "=>" in body and not body.split("=>", 1)[1].strip().startswith((".", "/")):
            lines.append(f"replace {body}")
    return "\n".join(lines) + ("\n" if lines else "")


def _simple(
    name: str,
    module: str,
    version: str,
    programs: tuple[Program, ...],
    *,
    extra: str = "",
    ldflags: str = "",
    source: str | None = None,
    carry_replaces: bool = False,
) -> Component:
    """A wrapper that requires `module` at `version`, with the `go` directive of its go.mod
    (`source`'s, where a replace serves it from another path); `carry_replaces`: with the
    module's own replaces of one module by a version of another (a replace applies only in
    the main module, and some modules build only with theirs)."""

    def go_mod() -> str:
        text = _module_go_mod(source or module, version)
        replaces = _version_replaces(text) if carry_replaces else ""
        return f"{_go_line(text)}\n\nrequire {module} {version}\n{extra}{replaces}"

    return Component(name, module, version, programs, go_mod, ldflags)


def components() -> list[Component]:
    """Every program of the control plane, in the order they are built (the API server
    first: the others are of no use without it)."""
    crossplane = "v" + pin("crossplane").lstrip("v")
    return [
        _kubernetes(),
        # server/v3's own go.mod replaces its siblings with ../api etc.; a wrapper needs none.
        _simple(
            "etcd",
            "go.etcd.io/etcd/server/v3",
            pin("etcd"),
            (Program("etcd", "go.etcd.io/etcd/server/v3"),),
        ),
        _simple(
            "kwok",
            "sigs.k8s.io/kwok",
            pin("kwok"),
            (Program("kwok", "sigs.k8s.io/kwok/cmd/kwok"),),
        ),
        # crossplane/v2's go.mod replaces apis/v2 with ./apis (so `go install` fails): the
        # wrapper requires the apis module at the same tag instead.
        _simple(
            "crossplane",
            "github.com/crossplane/crossplane/v2",
            crossplane,
            (Program("crossplane", "github.com/crossplane/crossplane/v2/cmd/crossplane"),),
            extra=f"require github.com/crossplane/crossplane/apis/v2 {crossplane}\n",
            ldflags=f"-X {CROSSPLANE_VERSION_VAR}={crossplane}",
        ),
        # function-auto-ready's go.mod names github.com/crossplane/function-auto-ready; the
        # proxy serves that tag under the repository's old path.
        _simple(
            "function-auto-ready",
            "github.com/crossplane/function-auto-ready",
            pin("function_auto_ready"),
            (Program("function-auto-ready", "github.com/crossplane/function-auto-ready"),),
            extra=(
                "replace github.com/crossplane/function-auto-ready => "
                f"github.com/crossplane-contrib/function-auto-ready {pin('function_auto_ready')}\n"
            ),
            source="github.com/crossplane-contrib/function-auto-ready",
        ),
        _simple(
            "provider-kubernetes",
            "github.com/crossplane-contrib/provider-kubernetes",
            pin("provider_kubernetes"),
            (
                Program(
                    "provider-kubernetes",
                    "github.com/crossplane-contrib/provider-kubernetes/cmd/provider",
                ),
            ),
        ),
        _simple(
            "provider-helm",
            "github.com/crossplane-contrib/provider-helm",
            pin("provider_helm"),
            (Program("provider-helm", "github.com/crossplane-contrib/provider-helm/cmd/provider"),),
        ),
        # The controllers that turn composed objects into pods (controllers.py starts them).
        # LeaderWorkerSet: the release of the chart we pin where the proxy serves it (v0.10.0
        # is refused: 403), else the stand-in kcl/versions.k names, whose LeaderWorkerSet API
        # differs from the pin's only by replicas' bounds (the CRD installed is the pin's).
        _simple(
            "lws",
            "sigs.k8s.io/lws",
            "v" + pin("lws").lstrip("v"),
            (Program("lws-controller", "sigs.k8s.io/lws/cmd"),),
        ),
        _simple(
            "lws-standin",
            "sigs.k8s.io/lws",
            pin("lws_controller_standin"),
            (Program("lws-controller", "sigs.k8s.io/lws/cmd"),),
        ),
        # KEDA's chart and its operator share the version; the operator builds only with the
        # replaces of its go.mod (k8s.io at 0.35, controller-runtime 0.23).
        _simple(
            "keda",
            "github.com/kedacore/keda/v2",
            "v" + pin("keda").lstrip("v"),
            (
                Program("keda", "github.com/kedacore/keda/v2/cmd/operator"),
                Program("keda-adapter", "github.com/kedacore/keda/v2/cmd/adapter"),
            ),
            carry_replaces=True,
        ),
        # The chainsaw the suites under tests/e2e are written for (devbox.json's).
        _simple(
            "chainsaw",
            "github.com/kyverno/chainsaw",
            "v" + pin("devbox.json:kyverno-chainsaw").lstrip("v"),
            (Program("chainsaw", "github.com/kyverno/chainsaw"),),
        ),
        _simple(
            "function-kcl",
            "github.com/crossplane-contrib/function-kcl",
            pin("function_kcl"),
            (Program("function-kcl", "github.com/crossplane-contrib/function-kcl"),),
        ),
    ]


def build(component: Component) -> None:
    """Build `component` into the cache (nothing to do when it is there); BuildError with the
    go command's own words when it cannot be built."""
    if component.built():
        return
    work = component.dir
    shutil.rmtree(work, ignore_errors=True)
    (work / "bin").mkdir(parents=True)
    (work / "go.mod").write_text(
        f"module example.local/{component.name}build\n\n{component.go_mod()}"
    )
    for program in component.programs:
        say(f"building {program.binary} ({component.module} {component.version}) ...")
        start = time.monotonic()
        out = _go(
            [
                "build",
                "-trimpath",
                "-ldflags",
                f"-s -w {component.ldflags}".strip(),
                "-o",
                str(work / "bin" / program.binary),
                program.package,
            ],
            work,
        )
        if out.returncode:
            shutil.rmtree(work / "bin", ignore_errors=True)
            raise BuildError(_essence(out.stderr))
        say(f"built {program.binary} in {time.monotonic() - start:.0f} s")


def _essence(stderr: str) -> str:
    """The lines of go's error that say what went wrong (not the download progress)."""
    lines = [
        ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("go: downloading")
    ]
    return "\n".join(lines[-6:])


def build_all() -> Built:
    """Every component that can be built, with the binaries' paths; a Gap for each that
    cannot (reported, never hidden)."""
    out = Built()
    for component in components():
        if component.name.removesuffix(STANDIN) in out.components:
            continue  # a stand-in, and the component itself was built
        try:
            build(component)
        except BuildError as err:
            say(f"{component.name} {component.version} cannot be built here:\n{err}")
            out.gaps.append(Gap(component.name, component.version, str(err)))
            continue
        for program in component.programs:
            out.binaries[program.binary] = component.binary(program.binary)
        out.components[component.name] = component
    return out
