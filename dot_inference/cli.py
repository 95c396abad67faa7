"""`dot-inference`: render, validate and generate, offline.

Exit codes: 0 success; 1 a pipeline returned a fatal result, validation found problems,
or generated files are stale; 2 the command could not run (bad input, missing file, no
Composition). Every failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import click

from dot_inference.crossplane import documents, printer

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "package"


class CLIError(Exception):
    """A failure reported as one line and exit code 2."""


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"dot-inference: {message}", err=True)
    sys.exit(code)


class _Group(click.Group):
    """Report usage errors and unexpected exceptions as one line, never a traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            _fail("aborted", 130)
        except click.ClickException as e:
            _fail(e.format_message(), e.exit_code)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:
            # The reader went away (`| head`): stop quietly, without a second error at exit.
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            sys.exit(1)
        if isinstance(rv, int):
            sys.exit(rv)
        sys.exit(0)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("dot-inference")
    except Exception:  # not installed as a distribution (a bare checkout)
        return "unknown"


@click.group(cls=_Group)
@click.version_option(_version(), "--version", prog_name="dot-inference")
def cli() -> None:
    """Offline tooling for the dot-inference Crossplane Configuration."""


# --------------------------------------------------------------------------- render


# An example's state (the resources Crossplane would supply as required resources, such as
# the InferenceCluster an LLMInference runs on) lives beside it in state/<same file name>.
STATE_DIR = "state"


def state_file(path: Path) -> Path:
    return path.parent / STATE_DIR / path.name


@dataclass
class _Job:
    path: Path
    xr: dict


def _render_module() -> Any:
    from dot_inference.crossplane import render

    return render


STDIN = Path("-")


def _collect_jobs(target: Path, is_xr: Any) -> tuple[list[_Job], bool]:
    if target == STDIN:
        jobs = [
            _Job(Path("<stdin>"), doc)
            for doc in documents.load_yaml_documents(sys.stdin.read(), "<stdin>")
            if is_xr(doc)
        ]
        if not jobs:
            raise CLIError("<stdin>: it holds no composite resource that a Composition composes")
        return jobs, False
    if not target.exists():
        raise CLIError(f"{target}: no such file or directory")
    directory = target.is_dir()
    jobs: list[_Job] = []
    for path in documents.yaml_files(target):
        if directory and STATE_DIR in path.relative_to(target).parts[:-1]:
            continue  # the state an example renders against, not an example
        try:
            text = path.read_text()
        except OSError as e:
            raise CLIError(f"{path}: cannot read: {e.strerror or e}") from e
        for doc in documents.load_yaml_documents(text, str(path)):
            if is_xr(doc):
                jobs.append(_Job(path, doc))
    if not jobs:
        what = "no file in it holds" if directory else "it holds no"
        raise CLIError(
            f"{target}: {what} composite resource that a Composition in the package composes"
        )
    return jobs, directory


def _load_many(paths: tuple[Path, ...]) -> list[dict]:
    objs: list[dict] = []
    for p in paths:
        objs.extend(documents.load_objects(p))
    return objs


def _validator() -> Any:
    try:
        from dot_inference.apiserver import validate_objects
    except ImportError as e:
        raise CLIError(f"validation is not available: {e}") from e
    return validate_objects


def _problem_lines(report: Any) -> list[str]:
    lines = [
        f"dot-inference: invalid: {name}: {err}"
        for name, errors in report.invalid
        for err in errors or ["invalid"]
    ]
    return lines + [f"dot-inference: no schema: {name}" for name in report.no_schema]


def _print_problems(report: Any) -> bool:
    lines = _problem_lines(report)
    for line in lines:
        click.echo(line, err=True)
    return bool(lines)


@cli.command("render")
@click.argument("target", metavar="XR.yaml|DIR|-", type=click.Path(path_type=Path, allow_dash=True))
@click.option(
    "-o",
    "--observed-resources",
    type=click.Path(path_type=Path),
    help="YAML file or directory of observed composed resources.",
)
@click.option(
    "-e",
    "--required-resources",
    type=click.Path(path_type=Path),
    multiple=True,
    help="YAML file or directory of resources functions may require (repeatable).",
)
@click.option(
    "--extra-resources",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Deprecated alias of --required-resources.",
)
@click.option(
    "-r",
    "--include-function-results",
    is_flag=True,
    help="Print function results as kind: Result documents.",
)
@click.option(
    "-c", "--include-context", is_flag=True, help="Print the pipeline context as kind: Context."
)
@click.option(
    "--package",
    "package_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Configuration package directory (default: the repository's package/).",
)
@click.option(
    "--composition",
    type=click.Path(path_type=Path),
    default=None,
    help="Use this Composition instead of selecting one from the package.",
)
@click.option(
    "--validate",
    is_flag=True,
    help="Validate the rendered objects against their schemas; exit 1 on problems.",
)
@click.option(
    "--lenient",
    is_flag=True,
    help="Render claims the API server would refuse (unknown fields, patterns, CEL rules), "
    "reporting the problems as warnings.",
)
@click.option("-q", "--quiet", is_flag=True, help="No summary line per claim on stderr.")
@click.option(
    "--hub",
    is_flag=True,
    help="Ask the Hugging Face Hub (or the mirror HF_ENDPOINT names) about models the catalog "
    "does not know, as the function does in a cluster. Off by default: render stays offline "
    "and sizes such models from their names.",
)
def render_cmd(
    target: Path,
    observed_resources: Path | None,
    required_resources: tuple[Path, ...],
    extra_resources: tuple[Path, ...],
    include_function_results: bool,
    include_context: bool,
    package_dir: Path | None,
    composition: Path | None,
    validate: bool,
    lenient: bool,
    quiet: bool,
    hub: bool,
) -> int:
    """Render composite resources offline, printing what `crossplane render` prints.

    XR.yaml renders the composite resources in one file; DIR renders every file below it
    that holds composite resources a Composition in the package composes (other files,
    such as functions.yaml, are skipped), each block preceded by a `# <path>` line; `-`
    reads them from standard input. Without --required-resources, an example's
    state/<file name> beside it (e.g. the InferenceCluster an LLMInference runs on) is used
    as its required resources.

    Strict by default: a claim the API server would refuse (an unknown or misspelt field,
    a value its XRD's patterns or CEL rules reject) is not rendered and exits 1. Each
    rendered claim gets one summary line on stderr (--quiet to drop it).
    """
    from function.model import hub as hub_client

    hub_client.reset_client(hub_client.HubClient(offline=None if hub else True))
    try:
        return _render(
            target,
            observed_resources,
            required_resources + extra_resources,
            include_function_results,
            include_context,
            package_dir,
            composition,
            validate,
            strict=not lenient,
            summary=not quiet,
        )
    except CLIError as e:
        _fail(str(e))
    except BrokenPipeError:
        raise
    except Exception as e:
        rmod = sys.modules.get("dot_inference.crossplane.render")
        if rmod is not None and isinstance(e, documents.RenderError):
            _fail(str(e))
        if isinstance(e, OSError):
            _fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
        _fail(f"internal error: {type(e).__name__}: {e}")


def _render(
    target: Path,
    observed_path: Path | None,
    required_paths: tuple[Path, ...],
    include_function_results: bool,
    include_context: bool,
    package_dir: Path | None,
    composition_path: Path | None,
    validate: bool,
    *,
    strict: bool = True,
    summary: bool = True,
) -> int:
    rmod = _render_module()
    validate_objects = _validator() if validate else None
    package_dir = package_dir or PACKAGE_DIR
    forced: dict | None = None
    if composition_path is not None:
        comps = [
            o for o in documents.load_objects(composition_path) if o.get("kind") == "Composition"
        ]
        if len(comps) != 1:
            raise CLIError(
                f"{composition_path}: expected exactly one Composition, found {len(comps)}"
            )
        forced = comps[0]
        pkg = documents.load_package(package_dir) if package_dir.is_dir() else documents.Package()
    else:
        pkg = documents.load_package(package_dir)
        if not pkg.compositions:
            raise CLIError(f"{package_dir}: the package has no Compositions")

    def is_xr(doc: Any) -> bool:
        if forced is not None:
            return rmod.handles(forced, doc)
        return rmod.is_handled_xr(pkg, doc)

    jobs, directory = _collect_jobs(target, is_xr)
    _JOB_CONTEXT.clear()
    _JOB_CONTEXT.update(
        rmod=rmod,
        pkg=pkg,
        forced=forced,
        package_dir=package_dir,
        jobs=jobs,
        directory=directory,
        observed=documents.load_objects(observed_path) if observed_path is not None else [],
        required=_load_many(required_paths),
        required_given=bool(required_paths),
        include_function_results=include_function_results,
        include_context=include_context,
        validate=validate_objects,
        strict=strict,
        summary=summary,
    )
    if validate_objects is not None:
        validate_objects([])  # load the schemas once, before any worker starts
    outcomes = _run_jobs(len(jobs))

    fatal = False
    for outcome in outcomes:
        for line in outcome.messages:
            click.echo(line, err=True)
        fatal = fatal or outcome.fatal
    click.echo("".join(o.chunk for o in outcomes), nl=False)
    problems = [line for o in outcomes for line in o.problems]
    for line in problems:
        click.echo(line, err=True)
    return 1 if fatal or problems else 0


@dataclass
class _Outcome:
    """What rendering one claim printed: stderr lines, the YAML, its validation problems."""

    messages: list[str]
    chunk: str = ""
    problems: list[str] = field(default_factory=list)
    fatal: bool = False


# What every job of one `render` shares; set before the jobs run (workers inherit it by fork).
_JOB_CONTEXT: dict[str, Any] = {}


def _workers(jobs: int) -> int:
    """Processes to render with: DOT_INFERENCE_JOBS, else one per CPU; one for a single claim
    or where fork is not available."""
    import multiprocessing

    if jobs < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    wanted = os.environ.get("DOT_INFERENCE_JOBS", "")
    count = int(wanted) if wanted.isdigit() and int(wanted) > 0 else (os.cpu_count() or 1)
    return max(1, min(count, jobs))


def _run_jobs(count: int) -> list[_Outcome]:
    workers = _workers(count)
    if workers == 1:
        return [_render_job(i) for i in range(count)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(_render_job, range(count)))


def _render_job(index: int) -> _Outcome:
    """Render (and, with --validate, validate) the index-th claim of this run."""
    c = _JOB_CONTEXT
    rmod, pkg, job = c["rmod"], c["pkg"], c["jobs"][index]
    xr = job.xr
    out = _Outcome(messages=[])
    problems = _claim_problems(pkg, xr, c["package_dir"])
    for problem in problems:
        level = "invalid" if c["strict"] else "warning"
        out.messages.append(f"dot-inference: {level}: {_who(xr)}: {problem}")
    if problems and c["strict"]:
        out.fatal = True
        return out
    comp = c["forced"] if c["forced"] is not None else rmod.select_composition(pkg, xr)
    obs = c["observed"]
    if c["directory"]:
        # Observed resources of other XRs in the directory are not this XR's.
        name = (xr.get("metadata") or {}).get("name")
        obs = [
            o
            for o in obs
            if ((o.get("metadata") or {}).get("labels") or {}).get("crossplane.io/composite", name)
            == name
        ]
    req = c["required"]
    if not c["required_given"] and state_file(job.path).is_file():
        req = documents.load_objects(state_file(job.path))
    result = rmod.render(
        xr, comp, rmod.default_runners(), xrd=rmod.find_xrd(pkg, xr), observed=obs, required=req
    )
    if result.fatal is not None:
        from dot_inference.function_kcl import user_message

        out.messages.append(f"dot-inference: {_who(xr)}: {user_message(result.fatal)}")
        out.fatal = True
        return out
    if c["summary"]:
        out.messages.append(f"dot-inference: {_who(xr)}: {_summary(xr, result)}")
    objs = result.objects(
        include_function_results=c["include_function_results"],
        include_context=c["include_context"],
    )
    out.chunk = (f"# {job.path}\n" if c["directory"] else "") + printer.dump_stream(objs)
    if c["validate"] is not None:
        # render prints the XR as Crossplane does (no spec); validate the claim with the
        # status the pipeline wrote.
        report = c["validate"]([{**xr, "status": result.xr.get("status", {})}, *result.composed])
        out.problems = _problem_lines(report)
    return out


def _who(xr: dict) -> str:
    meta = xr.get("metadata") or {}
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{xr.get('kind')} {ns}{meta.get('name')}"


def _claim_problems(pkg: Any, xr: dict, package_dir: Path) -> list[str]:
    """What the API server would say of the claim itself (its XRD's schema and CEL rules),
    with "did you mean" for a misspelt field."""
    try:
        from dot_inference.apiserver import validate_objects
    except ImportError:
        return []
    report = validate_objects([xr], schema_paths=[package_dir])
    return [e for _, errors in report.invalid for e in errors]


def _summary(xr: dict, result: Any) -> str:
    """One line of what was decided: for a model its GPUs, context, fit and endpoint; for a
    cluster its provider, GPU pool and how much it composes; and the warnings."""
    status = result.xr.get("status") or {}
    warnings = [r for r in result.results if r.get("severity") == "SEVERITY_WARNING"]
    parts: list[str] = []
    plan = status.get("plan")
    if xr.get("kind") == "LLMInference" and isinstance(plan, dict):
        gpu = (
            f"{plan.get('gpuType')} ({plan.get('gpuMemoryGiB')} GiB)"
            if not plan.get("gpuAssumed")
            else f"an assumed {plan.get('gpuMemoryGiB')} GiB GPU"
        )
        parts.append(f"{plan.get('model')} on {plan.get('gpus')} x {gpu}")
        # How the GPUs split the model, in status.plan.topology's words (after its shape).
        split = str(plan.get("topology") or "").split(": ", 1)[-1]
        if (plan.get("nodes") or 1) > 1:
            parts.append(f"{plan['nodes']} nodes ({split})")
        elif (plan.get("dataParallelSize") or 1) > 1 or (plan.get("expertParallelSize") or 1) > 1:
            parts.append(split)
        if plan.get("maxModelLen"):
            parts.append(f"context {plan['maxModelLen']}")
        parts.append("fits" if plan.get("fits") else "does NOT fit")
        if plan.get("simulated"):
            parts.append("simulated (no GPU)")
        replicas = status.get("replicas") or {}
        if replicas.get("autoscaled"):
            parts.append(f"{replicas.get('min')}-{replicas.get('max')} replicas (KEDA)")
        elif (replicas.get("max") or 1) > 1:
            parts.append(f"{replicas['max']} replicas")
        if status.get("endpoint"):
            parts.append(str(status["endpoint"]))
    else:
        spec = (xr.get("spec") or {}).get("parameters") or {}
        gpu = status.get("gpu") or {}
        if spec.get("provider"):
            parts.append(str(spec["provider"]))
        if gpu.get("shape"):
            where = f" on {gpu['instanceType']}" if gpu.get("instanceType") else ""
            parts.append(f"GPU pool {gpu['shape']}{where}")
        models = [o for o in result.composed if o.get("kind") == "LLMInference"]
        if models:
            parts.append(f"{len(models)} model(s)")
    parts.append(f"{len(result.composed)} resources")
    if warnings:
        parts.append(f"{len(warnings)} warning(s): {warnings[0].get('message')}")
    return ", ".join(parts)


# --------------------------------------------------------------------------- plan


@cli.command("plan")
@click.argument("model")
@click.option("--gpu", "gpu_types", multiple=True, help="Only this GPU type (repeatable).")
@click.option("--context", type=click.IntRange(1), help="Size for this context (maxModelLen).")
@click.option("--per-node", type=click.IntRange(1, 64), default=8, show_default=True)
@click.option(
    "--nodes",
    type=click.IntRange(1, 16),
    default=1,
    show_default=True,
    help="Nodes one replica may span (a cluster with apps.lws).",
)
@click.option(
    "--hub", is_flag=True, help="Ask the Hugging Face Hub about models the catalog lacks."
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "yaml", "json"]),
    default="table",
    show_default=True,
    help="yaml: a claim ready to apply for each GPU type that fits.",
)
@click.option(
    "--chart",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Draw one GPU's memory per GPU type into this PNG (needs dot-inference[chart]).",
)
def plan_cmd(
    model: str,
    gpu_types: tuple[str, ...],
    context: int | None,
    per_node: int,
    nodes: int,
    hub: bool,
    output: str,
    chart: Path | None,
) -> int:
    """Size MODEL on every GPU type as the function would: GPUs and how they split it,
    weights and KV cache per GPU, the context and the requests it holds at once."""
    from dot_inference import planner
    from function.limits import GPU_TYPES
    from function.model import hub as hub_client

    unknown = [g for g in gpu_types if g not in GPU_TYPES]
    if unknown:
        _fail(f"unknown GPU type {', '.join(unknown)}; known: {', '.join(GPU_TYPES)}")
    hub_client.reset_client(hub_client.HubClient(offline=None if hub else True))
    rows = planner.plan_rows(
        model, list(gpu_types) or None, context=context, per_node=per_node, nodes=nodes
    )
    if output == "yaml":
        click.echo(planner.claims_yaml(model, rows, context), nl=False)
    elif output == "json":
        click.echo(planner.as_json(rows), nl=False)
    else:
        click.echo(planner.table(rows, context, nodes), nl=False)
    if chart is not None:
        try:
            planner.chart(rows, chart, model)
        except planner.ChartUnavailable as e:
            _fail(str(e))
        click.echo(f"dot-inference: wrote {chart}", err=True)
    return 0


# --------------------------------------------------------------------------- validate


@cli.command("validate")
@click.argument("source", metavar="FILE|DIR|-", type=click.Path(path_type=Path, allow_dash=True))
def validate_cmd(source: Path) -> int:
    """Validate Kubernetes objects against the upstream schemas.

    Reads a YAML file, a directory of YAML files, or `-` for standard input. Documents of
    `crossplane render`'s own kinds (render.crossplane.io Result, Context) are skipped.
    """
    try:
        rmod = _render_module()
        if str(source) == "-":
            objs = documents.load_yaml_documents(sys.stdin.read(), "<stdin>")
            for doc in objs:
                if not isinstance(doc, dict):
                    raise CLIError(
                        f"<stdin>: expected Kubernetes objects, found a {type(doc).__name__}"
                    )
        else:
            objs = documents.load_objects(source)
        objs = [
            o for o in objs if not str(o.get("apiVersion", "")).startswith("render.crossplane.io/")
        ]
        report = _validator()(objs)
    except CLIError as e:
        _fail(str(e))
    except Exception as e:
        rmod = sys.modules.get("dot_inference.crossplane.render")
        if rmod is not None and isinstance(e, documents.RenderError):
            _fail(str(e))
        _fail(f"internal error: {type(e).__name__}: {e}")

    for name in report.valid:
        click.echo(f"valid: {name}")
    bad = _print_problems(report)
    summary = (
        f"{len(report.valid)} valid, {len(report.invalid)} invalid, "
        f"{len(report.no_schema)} without a schema"
    )
    click.echo(summary, err=bad)
    return 1 if bad or not report.ok else 0


# --------------------------------------------------------------------------- generate


@cli.command("generate")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if package/ is stale.")
def generate_cmd(check: bool) -> int:
    """Generate package/ from the KCL sources in kcl/."""
    try:
        from dot_inference.generate import generate

        return int(generate(check=check))
    except Exception as e:
        _fail(f"generate: {type(e).__name__}: {e}")


# --------------------------------------------------------------------------- vendor, pin


@cli.command("vendor")
@click.argument("folders", nargs=-1)
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a folder is stale.")
@click.option(
    "--git-url",
    help="Fetch from this git URL instead of the SOURCE's GitHub repository (one folder).",
)
def vendor_cmd(folders: tuple[str, ...], check: bool, git_url: str | None) -> int:
    """Re-vendor schemas/: every folder whose pin moved, or the FOLDERS named."""
    from dot_inference import vendor

    try:
        code, lines = vendor.vendor(list(folders), git_url=git_url, check=check)
    except (vendor.VendorError, OSError) as e:
        _fail(f"vendor: {e}")
    for line in lines:
        click.echo(line, err=code != 0)
    return code


@cli.command("pin")
@click.argument("name")
def pin_cmd(name: str) -> int:
    """Print a pinned version: NAME in kcl/versions.k, or devbox.json:<package>."""
    from dot_inference import pins

    try:
        click.echo(pins.pin(name))
    except (pins.PinError, OSError, ValueError) as e:
        _fail(f"pin: {e}")
    return 0


@cli.command("renovate-extract")
@click.argument(
    "repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path(".")
)
def renovate_extract_cmd(repo: Path) -> int:
    """Print every dependency Renovate finds in REPO (its tracked files), offline."""
    from dot_inference import renovate

    try:
        deps = renovate.extract(repo.resolve())
    except renovate.RenovateError as e:
        _fail(f"renovate-extract: {e}", 1)
    click.echo(renovate.rows(deps), nl=False)
    click.echo(f"{len(deps)} dependencies found", err=True)
    return 0


@cli.command("lint-workflows")
def lint_workflows_cmd() -> int:
    """actionlint on .github/workflows (installed on first use where it can be)."""
    from dot_inference import workflows

    try:
        code, message = workflows.lint()
    except (OSError, ValueError) as e:
        _fail(f"lint-workflows: {e}")
    click.echo(message, err=code != 0)
    return code


# --------------------------------------------------------------------------- release


@cli.group("release")
def release_group() -> None:
    """The project's version and where its release goes (pyproject.toml)."""


@release_group.command("info")
@click.argument("field", required=False)
def release_info_cmd(field: str | None) -> int:
    """Print KEY=value lines (version, tag, registry, packages), or one FIELD's value."""
    from dataclasses import asdict

    from dot_inference import release

    try:
        rel = release.release()
    except (release.ReleaseError, OSError, ValueError) as e:
        _fail(f"release: {e}")
    values = asdict(rel)
    if field is None:
        click.echo(rel.env(), nl=False)
    elif field in values:
        click.echo(values[field])
    else:
        _fail(f"release info: no field {field!r} (fields: {', '.join(values)})")
    return 0


@release_group.command("check-tag")
@click.argument("tag")
def release_check_tag_cmd(tag: str) -> int:
    """Exit 1 unless TAG (e.g. $GITHUB_REF_NAME) is v<the project's version>."""
    from dot_inference import release

    try:
        click.echo(f"releasing {release.check_tag(tag)}")
    except release.ReleaseError as e:
        _fail(f"release: {e}", 1)
    return 0


if __name__ == "__main__":  # pragma: no cover
    cli()
