"""How one replica's GPUs split a model: the GPU counts tensor parallelism can split it over,
the smallest count (or nodes) that holds it, a count the claim gives checked, and for a
mixture of experts the split of function/model/expert_parallel.py's rule. Pure: sizing.py
plans with what these choose."""

from __future__ import annotations

from function.limits import TENSOR_PARALLEL_CANDIDATES, GpuShape
from function.model import expert_parallel, vllm_memory
from function.model.catalog import ModelFacts
from function.model.sizing_checks import (
    EXPERT_FIELD,
    GPU_FIELD,
    SizingError,
    _check_facts,
    _check_gpu,
    _is_count,
)
from function.model.sizing_hints import SPAN, bigger_gpu_hint, offer, span_hint
from function.model.vllm_memory import EngineSettings


def _split_problem(facts: ModelFacts, gpus: int) -> str | None:
    """Why tensor parallelism cannot split this model over ``gpus`` GPUs, or None."""
    if facts.attention_heads % gpus:
        return f"does not divide the {facts.attention_heads} attention heads of {facts.id}"
    kv = facts.kv_heads
    if (kv % gpus) if gpus <= kv else (gpus % kv):
        return (
            f"and the {kv} key-value heads of {facts.id} do not split evenly "
            "(the GPU count must divide the KV heads or be a multiple of them)"
        )
    return None


def valid_gpu_counts(facts: ModelFacts, max_gpus: int) -> list[int]:
    """GPU counts from 1, 2, 4, 8 (<= max_gpus) that tensor parallelism can split facts over."""
    if not _is_count(max_gpus):
        return []
    if not all(_is_count(getattr(facts, a, None)) for a in ("attention_heads", "kv_heads")):
        return []
    if facts.attention_heads < 1 or facts.kv_heads < 1:
        return []
    return [
        n for n in TENSOR_PARALLEL_CANDIDATES if n <= max_gpus and _split_problem(facts, n) is None
    ]


def choose_gpus(facts: ModelFacts, gpu: GpuShape, engine: EngineSettings | None = None) -> int:
    """The smallest valid GPU count whose memory holds the model; SizingError when none does."""
    engine = engine or EngineSettings()
    _check_gpu(gpu)
    _check_facts(facts)
    counts = valid_gpu_counts(facts, gpu.per_node)
    if not counts:
        raise SizingError(
            GPU_FIELD,
            None,
            f"no GPU count up to the {gpu.per_node} GPUs of a node can split the "
            f"{facts.attention_heads} attention heads of {facts.id} evenly",
        )
    for n in counts:
        if vllm_memory.fits(facts, n, gpu, engine):
            return n
    most = counts[-1]
    need, _ = vllm_memory.required_gib(facts, most, gpu, engine)
    raise SizingError(
        GPU_FIELD,
        None,
        f"{facts.id} needs about {need * most:.0f} GiB of GPU memory, more than "
        f"a node offers: {offer(gpu, most, engine)}; {bigger_gpu_hint(facts, most, engine)}",
    )


def _checked_gpus(facts: ModelFacts, gpus: object, gpu: GpuShape, max_nodes: int = 1) -> int:
    valid = valid_gpu_counts(facts, gpu.per_node)
    use = ", ".join(str(n) for n in valid) or "none"
    if not _is_count(gpus):
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"must be a whole number of GPUs, got {gpus!r}",
            names_field=True,
            lead=" ",
        )
    if gpus < 1:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{gpus} is not a GPU count; use one of {use} for {facts.id}",
            names_field=True,
        )
    if gpus > gpu.per_node:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{gpus} is more than the {gpu.per_node} GPUs a node has and this target serves "
            f"a replica on one node{SPAN}, so use at most {gpu.per_node} (one of {use} for "
            f"{facts.id})",
            names_field=True,
        )
    problem = _split_problem(facts, gpus)
    if problem:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{gpus} {problem}; use one of {use} "
            "(tensor parallelism splits heads evenly across GPUs)",
            names_field=True,
        )
    return gpus


def choose_topology(
    facts: ModelFacts, gpu: GpuShape, engine: EngineSettings, max_nodes: int
) -> tuple[int, int]:
    """(tensor parallel size, nodes) for a model the function sizes: the GPUs of one node
    (choose_gpus), else, when the cluster serves across nodes (max_nodes > 1), every GPU of
    the fewest nodes that hold it, one pipeline stage per node (vLLM's multi-node guide:
    tensor parallel = GPUs per node, pipeline parallel = nodes)."""
    try:
        return choose_gpus(facts, gpu, engine), 1
    except SizingError as e:
        if max_nodes < 2:
            lws = span_hint(facts, e.template, max_nodes)
            if not lws:
                raise
            raise SizingError(e.field, e.value, e.template + lws) from e
    tp = max(valid_gpu_counts(facts, gpu.per_node) or [0])
    if tp and facts.task == "generate":
        for nodes in range(2, max_nodes + 1):
            if vllm_memory.fits(facts, tp, gpu, engine, nodes):
                return tp, nodes
    need, _ = vllm_memory.required_gib(facts, tp or gpu.per_node, gpu, engine, pipeline=max_nodes)
    total = need * (tp or gpu.per_node) * max_nodes
    raise SizingError(
        GPU_FIELD,
        None,
        f"{facts.id} needs about {total:.0f} GiB of GPU memory, more than the "
        f"{max_nodes} nodes one replica may span offer: "
        f"{offer(gpu, gpu.per_node * max_nodes, engine)}"
        + ("" if facts.task == "generate" else " (pooling models run on one node)"),
    )


def _checked_topology(
    facts: ModelFacts, gpus: object, gpu: GpuShape, max_nodes: int
) -> tuple[int, int]:
    """(tensor parallel size, nodes) for a GPU count the claim gives: one node, or, above a
    node's GPUs, whole nodes of the cluster serving across nodes."""
    if not _is_count(gpus) or gpus <= gpu.per_node or max_nodes < 2:
        return _checked_gpus(facts, gpus, gpu, max_nodes), 1
    nodes, rest = divmod(gpus, gpu.per_node)
    whole = ", ".join(str(gpu.per_node * n) for n in range(2, max_nodes + 1))
    if rest:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{gpus} GPUs span nodes of {gpu.per_node}: use whole nodes ({whole}) "
            f"or at most {gpu.per_node}",
            names_field=True,
        )
    if nodes > max_nodes:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{gpus} GPUs are {nodes} nodes of {gpu.per_node}, more than the "
            f"{max_nodes} one replica may span here (gpu.maxNodes of the cluster); use "
            f"at most {gpu.per_node * max_nodes}",
            names_field=True,
        )
    problem = _split_problem(facts, gpu.per_node)
    if problem:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{gpus} GPUs over {nodes} nodes split {facts.id} over "
            f"{gpu.per_node} GPUs per node, but {problem}",
            names_field=True,
        )
    if facts.task != "generate":
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{facts.id} is a pooling model and runs on one node",
            names_field=True,
        )
    return gpu.per_node, nodes


def _fits_split(
    facts: ModelFacts, split: expert_parallel.Split, gpu: GpuShape, engine: EngineSettings
) -> bool:
    return vllm_memory.fits(
        facts, split.tensor, gpu, engine, split.pipeline, split.data, split.expert
    )


def _ep_splits(
    facts: ModelFacts, gpus: int, nodes: int, gpu: GpuShape, expert: bool | None
) -> list[expert_parallel.Split]:
    """The splits the rule gives `gpus` GPUs over `nodes` nodes, best first: data parallel
    attention, then tensor parallel inside each node; only those tensor parallelism can
    split (heads)."""
    splits = [expert_parallel.split_for(facts, gpus, nodes, gpu.per_node, expert)]
    if splits[0].data > 1 and splits[0].tensor == 1:
        splits.append(
            expert_parallel.split_for(facts, gpus, nodes, gpu.per_node, expert, dp_attention=False)
        )
    return [s for s in splits if s.tensor == 1 or _split_problem(facts, s.tensor) is None]


def _check_expert(facts: ModelFacts, expert: bool | None, gpus: int | None) -> None:
    """`parallelism.expert: true` needs experts to split and GPUs to split them over."""
    if expert is not True:
        return
    if not expert_parallel.moe(facts):
        raise SizingError(
            EXPERT_FIELD,
            True,
            f"{facts.id} is a dense model (no routed experts"
            + (", or the facts known for it do not say how many" if facts.estimated else "")
            + "): expert parallelism splits a mixture of experts' experts over the GPUs; "
            f"remove {EXPERT_FIELD} (tensor parallelism splits the model over {GPU_FIELD})",
            names_field=True,
        )
    if gpus == 1:
        raise SizingError(
            EXPERT_FIELD,
            True,
            f"one GPU ({GPU_FIELD}: 1) has nothing to split the {facts.num_experts} experts of "
            f"{facts.id} over; set {GPU_FIELD} to 2 or more, or remove {EXPERT_FIELD}",
            names_field=True,
        )


def choose_split(
    facts: ModelFacts,
    gpu: GpuShape,
    engine: EngineSettings,
    max_nodes: int,
    expert: bool | None,
) -> expert_parallel.Split:
    """The smallest replica that holds the model: for a mixture of experts the split of
    function/model/expert_parallel.py's rule on each GPU count of a node, then on whole
    nodes; otherwise (or when no expert-parallel split fits and the claim did not ask for
    one) tensor parallel inside a node and pipeline parallel across (choose_topology)."""
    if expert is not False and expert_parallel.moe(facts):
        counts = [n for n in TENSOR_PARALLEL_CANDIDATES if n <= gpu.per_node]
        if expert is True:
            counts = [n for n in counts if n > 1]
        shapes = [(n, 1) for n in counts]
        if facts.task == "generate":
            shapes += [(gpu.per_node * k, k) for k in range(2, max_nodes + 1)]
        for n, nodes in shapes:
            for split in _ep_splits(facts, n, nodes, gpu, expert):
                if _fits_split(facts, split, gpu, engine):
                    return split
    tp, nodes = choose_topology(facts, gpu, engine, max_nodes)
    if expert is True and tp * nodes > 1:
        raise SizingError(
            EXPERT_FIELD,
            True,
            f"with the experts of {facts.id} split over the GPUs, no replica of up to "
            f"{max_nodes} node(s) of {gpu.per_node} holds it; tensor parallelism would "
            f"({tp * nodes} GPUs): remove {EXPERT_FIELD}",
            names_field=True,
        )
    return expert_parallel.Split(tensor=tp, pipeline=nodes, nodes=nodes)


def _checked_split(
    facts: ModelFacts,
    gpus: object,
    gpu: GpuShape,
    engine: EngineSettings,
    max_nodes: int,
    expert: bool | None,
) -> expert_parallel.Split:
    """The split of the GPU count the claim gives (whole nodes above one node): the rule's
    first split that fits, else its first (the plan then says what is short)."""
    tp, nodes = _checked_topology(facts, gpus, gpu, max_nodes)
    total = tp * nodes
    if expert_parallel.uses_expert_parallel(facts, expert, total, nodes):
        splits = _ep_splits(facts, total, nodes, gpu, expert)
        for split in splits:
            if _fits_split(facts, split, gpu, engine):
                return split
        if splits:
            return splits[0]
    return expert_parallel.Split(tensor=tp, pipeline=nodes, nodes=nodes)
