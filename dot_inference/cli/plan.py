"""`dot-inference plan`: size a model on every GPU type as the function would."""

from __future__ import annotations

from pathlib import Path

import click

from dot_inference.cli.common import _fail

# --------------------------------------------------------------------------- plan


@click.command("plan")
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
