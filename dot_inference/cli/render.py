"""`dot-inference render`: render composite resources offline, one claim per job (forked
workers), with a summary line per claim and optional validation."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from dot_inference.cli.common import (
    PACKAGE_DIR,
    CLIError,
    _fail,
    _problem_lines,
    _render_module,
    _validator,
)
from dot_inference.crossplane import documents, printer

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


@click.command("render")
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
