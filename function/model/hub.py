"""Asking the Hugging Face Hub about a model the catalog does not know: the only I/O of the
function besides gRPC, kept here so that everything else stays pure.

`HubClient.lookup` asks for the model's info (its revision, gated flag, pipeline tag, files
with their sizes and safetensors metadata) and its config.json (plus the small files vLLM
reads beside it: params.json of Mistral-format repositories, and for pooling models
tokenizer_config.json and sentence_bert_config.json), through `huggingface_hub`, so it
honours what every Hub client honours:

- `HF_ENDPOINT`: a company mirror, or a recorded Hub in the tests (read when the client is
  made, not when huggingface_hub was imported);
- `HF_HUB_OFFLINE`: no request at all; only what this process already knows.

Answers are cached per (model, revision, token) for `CACHE_TTL_S` (found) or
`MISS_TTL_S` (not found, gated, unreachable), in a bounded LRU, so a busy control plane asks
the Hub once an hour per model, not once per reconcile. A lookup that takes longer than the
deadline answers `unreachable` at once and finishes in the background: the next reconcile
finds the cache filled. The token, read from the claim's Secret, is used for the request and
kept only as a digest in the cache key; it never reaches a message.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Literal

from function.model.model_config import HubModel

Status = Literal["found", "not_found", "gated", "unreachable", "offline"]

DEFAULT_ENDPOINT = "https://huggingface.co"
REQUEST_TIMEOUT_S = 4.0  # one HTTP request
DEADLINE_S = 6.0  # the whole lookup, before the function answers without it
CACHE_TTL_S = 3600.0
MISS_TTL_S = 120.0
CACHE_ENTRIES = 1024
# Small files vLLM reads beside config.json, fetched when the repository has them.
SIDE_FILES = ("params.json", "tokenizer_config.json", "sentence_bert_config.json")
# A LoRA adapter's PEFT config (spec.parameters.adapters), cached apart from models.
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_KEY = "adapter:"


@dataclass(frozen=True)
class HubAnswer:
    status: Status
    model: HubModel | None = None
    message: str = ""  # why it is not `found`, naming the model; never the token
    revision: str | None = None
    # A LoRA adapter's adapter_config.json (`lookup_adapter`), as JSON data.
    adapter_config: dict[str, Any] | None = None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _token_key(token: str | None) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else ""


class HubClient:
    """Looks models up on the Hub (or the mirror HF_ENDPOINT names), with a cache."""

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        offline: bool | None = None,
        deadline_s: float = DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.offline = _truthy(os.environ.get("HF_HUB_OFFLINE")) if offline is None else offline
        self.deadline_s = deadline_s
        self._clock = clock
        self._cache: OrderedDict[tuple[str, str, str], tuple[float, HubAnswer]] = OrderedDict()
        self._pending: dict[tuple[str, str, str], Future[HubAnswer]] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="hub")

    # ------------------------------------------------------------------ cache

    def _cached(self, key: tuple[str, str, str]) -> HubAnswer | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is None:
                return None
            expires, answer = hit
            if expires < self._clock() and not self.offline:
                del self._cache[key]
                return None
            self._cache.move_to_end(key)
            return answer

    def _store(self, key: tuple[str, str, str], answer: HubAnswer) -> HubAnswer:
        ttl = CACHE_TTL_S if answer.status == "found" else MISS_TTL_S
        with self._lock:
            self._cache[key] = (self._clock() + ttl, answer)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
            self._pending.pop(key, None)
        return answer

    # ------------------------------------------------------------------ lookup

    def lookup(
        self, model_id: str, revision: str | None = None, token: str | None = None
    ) -> HubAnswer:
        """What the Hub says about `model_id` at `revision` (None: main), within the
        deadline; never raises."""
        key = (model_id.lower(), revision or "main", _token_key(token))
        return self._lookup(key, model_id, model_id, revision, token, adapter=False)

    async def lookup_async(
        self, model_id: str, revision: str | None = None, token: str | None = None
    ) -> HubAnswer:
        """`lookup` without blocking the event loop that serves gRPC."""
        return await asyncio.to_thread(self.lookup, model_id, revision, token)

    def lookup_adapter(self, repo: str, token: str | None = None) -> HubAnswer:
        """A LoRA adapter's adapter_config.json (function/model/adapters.py reads it), with
        the cache, deadline and offline switch of `lookup`; never raises."""
        key = (ADAPTER_KEY + repo.lower(), "main", _token_key(token))
        return self._lookup(key, repo, f"adapter {repo}", None, token, adapter=True)

    def _lookup(
        self,
        key: tuple[str, str, str],
        repo: str,
        what: str,
        revision: str | None,
        token: str | None,
        *,
        adapter: bool,
    ) -> HubAnswer:
        """The cache, the offline switch, one question in flight per key, the deadline."""
        cached = self._cached(key)
        if cached is not None:
            return cached
        if self.offline:
            return HubAnswer(
                "offline", message=f"HF_HUB_OFFLINE is set, so the Hub was not asked about {what}"
            )
        with self._lock:
            future = self._pending.get(key)
            if future is None:
                future = self._pool.submit(self._ask_and_store, key, repo, revision, token, adapter)
                self._pending[key] = future
        try:
            return future.result(timeout=self.deadline_s)
        except FutureTimeout:
            return HubAnswer(
                "unreachable",
                message=(
                    f"the Hugging Face Hub ({self.endpoint}) did not answer about {what} "
                    f"within {self.deadline_s:g} s; still asking in the background"
                ),
            )

    async def lookup_adapter_async(self, repo: str, token: str | None = None) -> HubAnswer:
        return await asyncio.to_thread(self.lookup_adapter, repo, token)

    def _ask_adapter(self, repo: str, token: str | None) -> HubAnswer:
        from huggingface_hub import constants, hf_hub_download
        from huggingface_hub import errors as hf_errors

        constants.HF_HUB_OFFLINE = False
        try:
            with tempfile.TemporaryDirectory(prefix="dot-inference-hub-") as tmp:
                path = hf_hub_download(
                    repo,
                    ADAPTER_CONFIG,
                    token=token or False,
                    cache_dir=tmp,
                    etag_timeout=REQUEST_TIMEOUT_S,
                    endpoint=self.endpoint,
                )
                with open(path, encoding="utf-8") as handle:
                    doc = json.load(handle)
        except hf_errors.GatedRepoError:
            return HubAnswer("gated", message=f"adapter {repo} is gated")
        except hf_errors.EntryNotFoundError:
            return HubAnswer("not_found", message=f"{repo} has no {ADAPTER_CONFIG}")
        except hf_errors.RepositoryNotFoundError:
            return HubAnswer(
                "not_found",
                message=f"adapter {repo} does not exist on the Hugging Face Hub (or it is private)",
            )
        except (json.JSONDecodeError, UnicodeDecodeError):
            return HubAnswer("not_found", message=f"{repo}'s {ADAPTER_CONFIG} is not JSON")
        except Exception as e:
            return HubAnswer(
                "unreachable",
                message=f"reading {ADAPTER_CONFIG} of {repo} from the Hub failed "
                f"({type(e).__name__})",
            )
        if not isinstance(doc, dict):
            return HubAnswer("not_found", message=f"{repo}'s {ADAPTER_CONFIG} is not an object")
        return HubAnswer("found", adapter_config=doc)

    def _ask_and_store(
        self,
        key: tuple[str, str, str],
        model_id: str,
        revision: str | None,
        token: str | None,
        adapter: bool = False,
    ) -> HubAnswer:
        try:
            answer = (
                self._ask_adapter(model_id, token)
                if adapter
                else self._ask(model_id, revision, token)
            )
        except Exception as e:  # a lookup must never take the function down
            answer = HubAnswer(
                "unreachable",
                message=f"asking the Hub about {model_id} failed ({type(e).__name__})",
            )
        return self._store(key, answer)

    def _ask(self, model_id: str, revision: str | None, token: str | None) -> HubAnswer:
        from huggingface_hub import HfApi, constants, hf_hub_download
        from huggingface_hub import errors as hf_errors

        # This client decides whether the Hub is asked (it read HF_HUB_OFFLINE when it was
        # made); huggingface_hub read it once at import and refuses every request while set.
        constants.HF_HUB_OFFLINE = False
        api = HfApi(endpoint=self.endpoint)
        where = f"{model_id}" + (f" at revision {revision}" if revision else "")
        try:
            info = api.model_info(
                model_id,
                revision=revision,
                files_metadata=True,
                timeout=REQUEST_TIMEOUT_S,
                token=token or False,
            )
        except hf_errors.RevisionNotFoundError:
            return HubAnswer("not_found", message=f"{model_id} has no revision {revision!r}")
        except hf_errors.RepositoryNotFoundError:
            return HubAnswer(
                "not_found",
                message=f"{model_id} does not exist on the Hugging Face Hub "
                "(or it is private and the token given cannot see it)",
            )
        except hf_errors.HfHubHTTPError as e:
            code = getattr(getattr(e, "response", None), "status_code", None)
            return HubAnswer("unreachable", message=f"the Hub answered {code} about {where}")
        except Exception as e:
            return HubAnswer(
                "unreachable",
                message=f"the Hugging Face Hub ({self.endpoint}) could not be reached about "
                f"{where} ({type(e).__name__})",
            )
        sha = getattr(info, "sha", None) or revision or "main"
        files = {
            s.rfilename: (s.size if isinstance(getattr(s, "size", None), int) else None)
            for s in (info.siblings or [])
        }
        safetensors = getattr(info, "safetensors", None)
        parameters = dict(getattr(safetensors, "parameters", None) or {})
        fetched: dict[str, Any] = {}
        wanted = ["config.json", *(f for f in SIDE_FILES if f in files)]
        for name in wanted:
            try:
                # A directory per file, removed at once: the answer is cached in memory, so
                # nothing accumulates on disk.
                with tempfile.TemporaryDirectory(prefix="dot-inference-hub-") as tmp:
                    path = hf_hub_download(
                        model_id,
                        name,
                        revision=sha,
                        token=token or False,
                        cache_dir=tmp,
                        etag_timeout=REQUEST_TIMEOUT_S,
                        endpoint=self.endpoint,
                    )
                    with open(path, encoding="utf-8") as handle:
                        fetched[name] = json.load(handle)
            except hf_errors.GatedRepoError:
                return HubAnswer(
                    "gated",
                    message=f"{model_id} is gated: its files need a Hugging Face token of an "
                    "account that accepted its licence",
                    revision=sha,
                )
            except (hf_errors.EntryNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
                continue
            except Exception as e:
                return HubAnswer(
                    "unreachable",
                    message=f"reading {name} of {where} from the Hub failed ({type(e).__name__})",
                    revision=sha,
                )
        gated = getattr(info, "gated", False)
        model = HubModel(
            id=getattr(info, "id", None) or model_id,
            sha=sha,
            gated=bool(gated) and gated is not False,
            pipeline_tag=getattr(info, "pipeline_tag", None),
            parameters={str(k): int(v) for k, v in parameters.items() if isinstance(v, int)},
            files=files,
            config=fetched.get("config.json"),
            params_json=fetched.get("params.json"),
            tokenizer_config=fetched.get("tokenizer_config.json"),
            sentence_config=fetched.get("sentence_bert_config.json"),
        )
        return HubAnswer("found", model=model, revision=sha)


_CLIENT: HubClient | None = None
_CLIENT_LOCK = threading.Lock()


def client() -> HubClient:
    """The process's client (made on first use, so HF_ENDPOINT set before that counts)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = HubClient()
        return _CLIENT


def reset_client(new: HubClient | None = None) -> None:
    """Forget the process's client (tests point HF_ENDPOINT elsewhere, then call this)."""
    global _CLIENT
    with _CLIENT_LOCK:
        _CLIENT = new
