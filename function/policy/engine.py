"""The engine's command line: the vLLM arguments the plan and the claim give, checked by vLLM's
own parser, and where a claim's KV cache may be sent."""

from __future__ import annotations

import json

from function.claim.spec import LLMSpec, P, SpecError
from function.cluster.target import Target
from function.model import catalog, sizing
from function.outcome import Outcome
from function.policy import engine_args, tenancy
from function.policy.lora_args import vllm_lora_args
from function.policy.parallel_args import vllm_parallel_args

# The variable the production-stack controller fills from `model.hfTokenSecret` (the only
# one it takes from a Secret: vllmConfig.env holds literal values only).
ENGINE_SECRET_ENV = "HF_TOKEN"

# vLLM 0.17.1's flags for Mistral-format repositories (config/model.py tokenizer_mode and
# config_format "mistral"; config/load.py load_format "mistral").
MISTRAL_FORMAT_ARGS = [
    "--tokenizer-mode",
    "mistral",
    "--config-format",
    "mistral",
    "--load-format",
    "mistral",
]


# Items per prompt of each modality (vLLM's default is 999 of each: config/multimodal.py).
# A bound keeps the encoder cache, which vLLM sizes for the largest prompt, and the memory a
# hostile prompt can take small; raise it with engine.extraArgs --limit-mm-per-prompt.
MM_LIMITS = {"image": 4, "video": 1, "audio": 1}


# Flags the function sets itself that a user's engine.extraArgs may override (the last
# occurrence wins in vLLM's argument parser); the function says so. Flags a field owns are
# refused instead (engine_args.OWNED).
MANAGED_FLAGS = (
    "--trust-remote-code",
    "--reasoning-parser",
    "--runner",
    "--max-model-len",
    "--dtype",
    "--gpu-memory-utilization",
    "--tool-call-parser",
    "--limit-mm-per-prompt",
    "--tokenizer-mode",
    "--config-format",
    "--load-format",
)


def vllm_args(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    out: Outcome,
    api_key_arg: bool = True,
) -> list[str]:
    # Every name the engine answers to, the Hugging Face id first: vLLM 0.17.1 takes a list
    # (config/model.py served_model_name), labels its metrics and answers with the first,
    # and lists one model card per name at /v1/models (entrypoints/openai/models/
    # serving.py), each of which the router registers for routing.
    args = ["--served-model-name", *spec.served_names]
    # A mixture of experts over data parallel ranks and split experts (function/policy/
    # parallel_args.py); nothing for a tensor parallel plan.
    args += vllm_parallel_args(plan)
    # spec.parameters.adapters: LoRA, served statically (function/policy/lora_args.py).
    args += vllm_lora_args(plan.lora)
    if spec.api_key_secret is not None and api_key_arg:
        # The controller's one variable from a Secret carries the key (see
        # build_production_stack); the kubelet expands $(HF_TOKEN) in the arguments, so the
        # manifest holds no key.
        args += ["--api-key", f"$({ENGINE_SECRET_ENV})"]
    if facts is not None:
        if facts.trust_remote_code:
            args.append("--trust-remote-code")
        if facts.reasoning_parser:
            args += ["--reasoning-parser", facts.reasoning_parser]
        if facts.mistral_format:
            # Mistral's own format (params.json, consolidated weights, tekken tokenizer):
            # vLLM detects it only by listing the repository, which an engine started offline
            # from the model cache cannot, so say it (vLLM's Mistral recipes do).
            args += MISTRAL_FORMAT_ARGS
        if facts.multimodal:
            limits = {m: MM_LIMITS.get(m, 1) for m in facts.multimodal}
            args += ["--limit-mm-per-prompt", json.dumps(limits, separators=(",", ":"))]
        args += list(facts.extra_args)
    if plan.runner:
        args += ["--runner", plan.runner]
    if plan.context_auto and spec.engine.context is None:
        # Nobody knows the model's context: vLLM takes the smaller of its own and what the
        # KV cache holds (vLLM 0.17.1 `--max-model-len auto`, kv_cache_utils.py
        # `_auto_fit_max_model_len`), instead of a guess it could refuse.
        args += ["--max-model-len", "auto"]
    overridden = sorted(
        {n for a in spec.engine.extra_args if (n := engine_args.flag_name(a)) in MANAGED_FLAGS}
    )
    if overridden:
        out.notes.append(
            f"{P}.engine.extraArgs overrides {', '.join(overridden)} set by the function "
            "(the last occurrence wins)"
        )
    return args + list(spec.engine.extra_args)


def planned_max_model_len(spec: LLMSpec, plan: sizing.Plan, out: Outcome) -> int | None:
    wanted = spec.engine.context
    if wanted is None:
        return plan.max_model_len or None
    where = (
        f"{P}.engine.maxModelLen"
        if spec.engine.max_model_len
        else f"{P}.engine.extraArgs --max-model-len"
    )
    if plan.fits and plan.max_model_len and wanted > plan.max_model_len:
        out.warnings.append(
            f"{where}: {wanted} tokens do not fit the KV cache of this plan "
            f"(about {plan.max_model_len} do); vLLM refuses to start when one sequence of "
            "max-model-len does not fit. Lower it or add GPUs."
        )
    return wanted


def check_kv_endpoints(spec: LLMSpec, target: Target) -> None:
    """The KV cache holds the prompts: a claim's own engine settings may send it only inside
    the pod or to an address the platform team listed (InferenceCluster
    spec.parameters.tenancy.kvTransferHosts). Disaggregated models are wired by the
    function, and their own settings are refused earlier (claim/serving.py)."""
    where = (
        f"spec.parameters.tenancy.kvTransferHosts of InferenceCluster "
        f"{spec.namespace}/{target.cluster}"
        if target.cluster
        else "an InferenceCluster's spec.parameters.tenancy.kvTransferHosts (then name it in "
        f"{P}.clusterRef)"
    )
    for send in tenancy.kv_addresses(spec.engine.extra_args, spec.engine.env):
        env = send.where.split(".")[0] in tenancy.KV_ENV
        f = f"{P}.engine.env" if env else f"{P}.engine.extraArgs"
        if send.problem is not None:
            raise SpecError(
                f,
                send.address,
                problem=f"{send.where} {send.problem} ({send.address}), so the function cannot "
                "tell where it sends the KV cache, and with it the prompts; write the address "
                f"out, inside the pod (127.0.0.1) or one listed in {where}",
            )
        if send.address in tenancy.LOOPBACK or send.address in target.kv_transfer_hosts:
            continue
        what = (
            "the encoder cache (computed from the prompts' images)"
            if send.where.startswith("--ec-transfer-config")
            else "the KV cache's events (the prompts' token ids)"
            if send.where.startswith("--kv-events-config")
            else "the KV cache, and with it the prompts,"
        )
        raise SpecError(
            f,
            send.address,
            problem=f"{send.where} sends {what} to {send.address}, "
            f"which the platform team has not allowed; the engine may keep it in the pod "
            f"(127.0.0.1) or send it to an address listed in {where}",
        )
