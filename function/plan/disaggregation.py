"""Prefill/decode disaggregation (llm-d): each side's plan, and what its KV transfer needs."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from function.claim.spec import LLMSpec, P, SpecError
from function.cluster.target import Target
from function.limits import MAX_GPUS
from function.model import catalog, node_fit, sizing, vllm_memory
from function.model.facts import model_facts
from function.outcome import Inputs, Outcome
from function.plan import storage
from function.plan.fit import engine_settings
from function.policy import vllm_cli


@dataclass(frozen=True)
class RolePlan:
    """One kind of vLLM pod of an llm-d model: its role, count and plan."""

    role: str  # aggregated | prefill | decode
    replicas: int | None  # None: KEDA owns the count
    plan: sizing.Plan


def plan_role(
    spec: LLMSpec,
    facts: catalog.ModelFacts,
    gpus: int | None,
    target: Target,
    engine: vllm_memory.EngineSettings,
    field_: str,
) -> sizing.Plan:
    """A plan on one node for one side of a disaggregated model, refused where vLLM would
    not start (the messages name the side's field)."""
    try:
        plan = sizing.plan(facts, gpus, target.gpu, engine, 1, one_pod=True)
    except sizing.SizingError as e:
        # A side's pods are one pod each; the message names the side's own field.
        message = e.render(field=field_, one_pod=True)
        where = field_ if gpus is not None else f"{P}.model"
        if not (e.names_field and e.lead == ": " and where == field_):
            message = f"{where}: {message}"
        raise SpecError(where, gpus or spec.model, message) from e
    if target.pod_cpu_millicores and target.pod_memory_mib:
        plan = node_fit.fit_to_node(
            plan,
            target.pod_cpu_millicores - storage.FETCH_CPU_MILLICORES,
            target.pod_memory_mib - storage.FETCH_MEMORY_MIB,
            f"one {target.instance_type or 'GPU node'} of {target.cluster or 'the cluster'}",
        )
    if plan.shortfall and not target.gpu.assumed and not facts.estimated:
        raise SpecError(
            field_,
            plan.gpus,
            f"{field_}: {plan.gpus} GPU(s) cannot hold {spec.model} on "
            f"{target.cluster or 'this cluster'}: {plan.shortfall}",
        )
    return plan


def plan_disaggregated(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts, sizing.Plan, str, list[RolePlan]]:
    """The prefill and decode plans of a disaggregated model. Both run with vLLM's NIXL
    connector, and vLLM 0.17.1 turns its hybrid KV cache manager off whenever a
    `--kv-transfer-config` is set and the claim states no preference (config/vllm.py), so
    windowed layers are sized as full ones (and stating one is refused: NixlConnector
    cannot run with the manager, kv_connector/factory.py). Prefill favours compute: by default
    the fewest GPUs that hold the model, so more pods prefill side by side. Decode favours KV
    memory: by default twice that (llm-d's P/D guide runs prefill at TP 1 and decode at TP 4),
    more room for the requests it decodes together."""
    facts, source = model_facts(spec, inputs, out)
    roles = pd_roles(spec, facts, target, engine_settings(spec))
    decode = next(r for r in roles if r.role == "decode")
    assert facts is not None  # pd_roles refuses a model it does not know
    return facts, decode.plan, source, roles


def pd_roles(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    target: Target,
    engine: vllm_memory.EngineSettings,
) -> list[RolePlan]:
    """The prefill and decode pods of a disaggregated model on `target`'s GPU nodes, each on
    one node; refused (SpecError naming the field) where the model or the GPUs cannot
    support them. Pure: the plan and placement both call it."""
    d = spec.disaggregation
    assert d is not None
    f = f"{P}.disaggregation"
    if facts is None:
        raise SpecError(
            f,
            spec.model,
            f"{f}: {spec.model} is not in the catalog and the Hugging Face Hub could not "
            "describe it, so its KV cache layout, which the prefill and decode pods must "
            "share, is not known; serve it aggregated (remove disaggregation)",
        )
    if facts.task != "generate":
        raise SpecError(
            f,
            spec.model,
            f"{f}: {spec.model} is a {facts.task} model: it answers in one pass, with no decode "
            "phase to move to other pods; remove disaggregation",
        )
    if any(g.kind == "mamba" for g in facts.kv_layers):
        raise SpecError(
            f,
            spec.model,
            f"{f}: {spec.model} keeps mamba (linear attention) state beside its KV cache, "
            f"which vLLM {vllm_cli.VERSION} can hold only with its hybrid KV cache manager, and "
            "the NIXL connector turns that off (it does not support it); serve it aggregated",
        )
    pd_facts = dataclasses.replace(facts, hybrid_kv=False)
    one_node = dataclasses.replace(target, lws=False)
    prefill = plan_role(spec, pd_facts, d.prefill.gpu, one_node, engine, f"{f}.prefill.gpu")
    decode_gpus = d.decode.gpu
    if decode_gpus is None:
        decode_gpus = prefill.gpus
        wider = prefill.gpus * 2
        if wider <= target.gpu.per_node and not kv_transfer_problem(
            spec, facts, prefill.gpus, wider
        ):
            try:
                sizing.plan(pd_facts, wider, target.gpu, engine, 1)
                decode_gpus = wider
            except sizing.SizingError:
                pass  # the heads do not split that way: the same as prefill
    decode = plan_role(spec, pd_facts, decode_gpus, one_node, engine, f"{f}.decode.gpu")
    check_kv_transfer(spec, facts, prefill, decode)
    return [
        RolePlan("prefill", d.prefill.replicas, prefill),
        RolePlan("decode", d.decode.replicas, decode),
    ]


def kv_transfer_problem(
    spec: LLMSpec, facts: catalog.ModelFacts, p: int, d: int
) -> tuple[str, int, str] | None:
    """Why vLLM 0.17.1's NIXL connector could not move the KV cache from prefill pods of `p`
    GPUs to decode pods of `d`: (field, value, message), or None.

    - one tensor parallel size must be a multiple of the other (kv_connector/utils.py
      `tp_ratio`);
    - a side replicates the KV heads when its size is at least their number
      (`is_kv_replicated`: tp // kv_heads >= 1); a wider prefill side may not replicate
      (nixl_connector.py `_validate_remote_agent_handshake`), and a wider decode side may
      replicate only if prefill does too (its block length must be prefill's divided by the
      ratio). MLA caches a latent vector, not heads: any ratio goes."""
    f = f"{P}.disaggregation"
    if max(p, d) % min(p, d):
        return (
            f"{f}.decode.gpu",
            d,
            f"{f}.decode.gpu: prefill on {p} GPU(s) and decode on {d}: NIXL moves the KV "
            "cache between tensor parallel sizes only when one is a multiple of the other; "
            f"use e.g. {f}.decode.gpu {p * 2 if p * 2 <= MAX_GPUS else p}",
        )
    kv = facts.kv_heads
    if not kv or any(g.kind == "mla" for g in facts.kv_layers):
        return None
    if p > d and p >= kv:
        return (
            f"{f}.prefill.gpu",
            p,
            f"{f}.prefill.gpu: prefill on {p} GPUs holds one of {spec.model}'s {kv} KV heads "
            f"per GPU or fewer (replicated), and NIXL cannot send a replicated cache to a "
            f"narrower decode side ({d} GPUs); use {f}.prefill.gpu {max(1, kv // 2)} or "
            f"fewer, or {f}.decode.gpu {p}",
        )
    if d > p and d > kv and p < kv:
        return (
            f"{f}.decode.gpu",
            d,
            f"{f}.decode.gpu: decode on {d} GPUs replicates {spec.model}'s {kv} KV heads "
            f"while prefill on {p} splits them, and NIXL cannot fit the one layout into the "
            f"other; use {f}.decode.gpu {kv} or fewer, or {f}.prefill.gpu {kv} or more",
        )
    return None


def check_kv_transfer(
    spec: LLMSpec, facts: catalog.ModelFacts, prefill: sizing.Plan, decode: sizing.Plan
) -> None:
    """What NIXL needs of the two sides (`kv_transfer_problem`), and the same KV cache dtype
    on both (its compatibility hash)."""
    f = f"{P}.disaggregation"
    problem = kv_transfer_problem(
        spec, facts, prefill.tensor_parallel_size, decode.tensor_parallel_size
    )
    if problem:
        raise SpecError(*problem)
    kinds = {r.engine.kv_cache_dtype for r in (prefill, decode) if r.engine is not None}
    if len(kinds) > 1:
        raise SpecError(
            f,
            sorted(kinds),
            f"{f}: the prefill and decode pods would store the KV cache as "
            f"{' and '.join(sorted(kinds))}; NIXL refuses to pair them (set --kv-cache-dtype "
            "in engine.extraArgs)",
        )
