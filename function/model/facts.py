"""The model-facts stage: what the function knows about the claim's model (the catalog, else
the Hugging Face Hub, else its name) and which token the Hub is asked with."""

from __future__ import annotations

import base64
import binascii
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from function.claim.spec import (
    DEFAULT_HF_TOKEN_KEY,
    DEFAULT_HF_TOKEN_SECRET,
    LLMSpec,
    P,
    SecretRef,
    SpecError,
    parse,
)
from function.model import catalog, catalog_lookup, model_config, name_estimate
from function.outcome import Inputs, Outcome
from function.policy import engine_args


@dataclass(frozen=True)
class HubQuery:
    """What to ask the Hub: the model, the revision the claim pins, the token to use."""

    model: str
    revision: str | None
    token: str | None = field(default=None, repr=False)


# The requirement through which Crossplane fetches the claim's Hugging Face token Secret.
HF_TOKEN_REQUIREMENT = "secret-hf-token"


def hub_token_ref(spec: LLMSpec) -> SecretRef:
    """The Secret whose token the Hub is asked with: the claim's, else the default one."""
    return spec.hf_token_secret or SecretRef(DEFAULT_HF_TOKEN_SECRET, DEFAULT_HF_TOKEN_KEY)


def secret_value(found: list[dict[str, Any]], key: str) -> str | None:
    """One key of a Secret Crossplane fetched (data is base64, stringData is not)."""
    if not found or not isinstance(found[0], dict):
        return None
    secret = found[0]
    plain = (secret.get("stringData") or {}).get(key)
    if isinstance(plain, str) and plain:
        return plain.strip()
    encoded = (secret.get("data") or {}).get(key)
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8").strip() or None
    except (binascii.Error, UnicodeDecodeError):
        return None


def hub_query(inputs: Inputs) -> HubQuery | None:
    """What fn.py should ask the Hub before compose, or None: the claim is unreadable, the
    catalog knows the model, or Crossplane has not fetched the token Secret yet (it does on
    the next call of the same reconcile, asked for by `compose`)."""
    try:
        spec = parse(inputs.xr)
    except SpecError:
        return None
    if spec.engine.simulate:
        return None  # a simulated model is planned from the catalog or its name only
    if catalog_lookup.lookup(spec.model) is not None or HF_TOKEN_REQUIREMENT not in inputs.required:
        return None
    token = secret_value(inputs.required[HF_TOKEN_REQUIREMENT], hub_token_ref(spec).key)
    return HubQuery(model=spec.model, revision=spec.engine.revision, token=token)


def adapter_queries(inputs: Inputs) -> tuple[tuple[str, ...], str | None]:
    """The adapters' repositories fn.py should ask the Hub about (their adapter_config.json),
    and the token to ask with (the claim's Hugging Face token when Crossplane fetched it);
    none for a simulated model, which is planned without the Hub."""
    try:
        spec = parse(inputs.xr)
    except SpecError:
        return (), None
    if spec.engine.simulate or not spec.adapters or HF_TOKEN_REQUIREMENT not in inputs.required:
        return (), None  # asked once Crossplane fetched the token Secret, as for a model
    found = inputs.required[HF_TOKEN_REQUIREMENT]
    token = secret_value(found, hub_token_ref(spec).key) if found else None
    return tuple(a.repo for a in spec.adapters), token


def require_hub_token(spec: LLMSpec, out: Outcome) -> None:
    """Ask Crossplane for the Secret whose token the Hub is asked with."""
    ref = hub_token_ref(spec)
    out.requirements[HF_TOKEN_REQUIREMENT] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "matchName": ref.name,
        "namespace": spec.namespace,
    }


def hf_token_ref(spec: LLMSpec, facts: catalog.ModelFacts | None) -> SecretRef | None:
    if spec.hf_token_secret is not None:
        return spec.hf_token_secret
    # A gated model's weights from another source need no token to download.
    if facts is not None and facts.gated and spec.source is None:
        return SecretRef(DEFAULT_HF_TOKEN_SECRET, DEFAULT_HF_TOKEN_KEY)
    return None


def model_facts(
    spec: LLMSpec, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts | None, str]:
    """The model's facts and where they come from: the catalog, the Hub (config.json and
    safetensors metadata, read by function/model/model_config.py) or the id alone. A model the Hub
    says does not exist is refused, with the catalog id it is likely a typo of."""
    facts = catalog_lookup.lookup(spec.model)
    if facts is not None:
        return facts, "catalog"
    ref = hub_token_ref(spec)
    out.requirements[HF_TOKEN_REQUIREMENT] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "matchName": ref.name,
        "namespace": spec.namespace,
    }
    answer = inputs.hub
    near = catalog_lookup.near_id(spec.model)
    if answer is not None and answer.status == "found" and answer.model is not None:
        try:
            return model_config.facts(answer.model), "hub"
        except model_config.UnsupportedArchitecture as e:
            raise SpecError(f"{P}.model", spec.model, f"{P}.model: {e}") from e
        except model_config.ConfigError as e:
            out.warnings.append(f"{P}.model: {e}; sized from its name instead")
    elif answer is not None and answer.status == "not_found":
        raise SpecError(
            f"{P}.model",
            spec.model,
            f"{P}.model: {answer.message}"
            + (f"; did you mean {near}?" if near else "")
            + (
                f" Check the id, or set {P}.hfTokenSecretRef to a token that can see it"
                if not near
                else ""
            ),
        )
    elif answer is not None and answer.status == "gated":
        out.warnings.append(
            f"{P}.hfTokenSecretRef: {answer.message}; put such a token in Secret "
            f"{spec.namespace}/{ref.name} (key {ref.key}) or name another in "
            f"{P}.hfTokenSecretRef. Until then the model is sized from its name"
        )
    elif answer is not None:
        out.notes.append(f"{answer.message}; {spec.model} is sized from its name until it answers")
    if near and (answer is None or answer.status != "found"):
        out.warnings.append(
            f"{P}.model: {spec.model} is not in the catalog, but {near} is: did you mean "
            f"it? As written, the model is sized from its name only"
        )
    estimate = name_estimate.estimate_from_name(spec.model)
    return estimate, "estimated" if estimate is not None else "unknown"


def as_run(spec: LLMSpec, facts: catalog.ModelFacts | None) -> catalog.ModelFacts | None:
    """The model's facts as the claim's vLLM will hold them: windowed layers sized as full
    when its arguments turn the hybrid KV cache manager off. The plan and placement both
    size with these."""
    if facts is not None and hybrid_off(spec):
        return dataclasses.replace(facts, hybrid_kv=False)
    return facts


def hybrid_off(spec: LLMSpec) -> bool:
    """Whether the claim's own arguments turn vLLM's hybrid KV cache manager off: explicitly,
    or with a KV connector and no stated preference (vLLM 0.17.1 config/vllm.py), so that
    windowed layers take full-length KV."""
    args = spec.engine.extra_args
    if engine_args.sets(args, "--no-disable-hybrid-kv-cache-manager"):
        return False
    return engine_args.sets(args, "--disable-hybrid-kv-cache-manager") or engine_args.sets(
        args, "--kv-transfer-config"
    )


def facts_status(facts: catalog.ModelFacts, source: str) -> dict[str, Any]:
    """Where the facts about the model came from (status.plan.facts)."""
    out: dict[str, Any] = {"source": source}
    if facts.provenance:
        out["origin"] = {name: where for name, where in facts.provenance}
    if source != "hub":
        out["sources"] = list(facts.sources[:3])
    return out
