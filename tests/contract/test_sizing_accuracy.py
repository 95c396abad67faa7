"""benchmarks/sizing_accuracy.py's targets hold: over every recorded model, weights within
5 % of the checkpoint, KV bytes per token equal to vLLM's layer-by-layer arithmetic, and no
plan vLLM would refuse (or could not run a request of) on L4, A100 40 GB, H100 or H200."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import sizing_accuracy


def test_the_sizing_accuracy_targets_are_met(capsys) -> None:
    assert sizing_accuracy.main([]) == 0
    out = capsys.readouterr().out
    assert "NOT MET" not in out
    rows = [sizing_accuracy.measure(d) for d in sizing_accuracy.recorded()]
    assert len(rows) >= 40
    assert {r.source for r in rows} == {"catalog", "hub"}
    assert sum(r.plans for r in rows) >= 150


def test_the_replay_catches_a_plan_packed_beyond_vllms_memory(monkeypatch) -> None:
    """The benchmark can fail: plans made without the safety margin and with a smaller
    activation than vLLM's are refused by the replay."""
    from function.model import vllm_memory

    monkeypatch.setattr(vllm_memory, "KV_SAFETY_FRACTION", -0.15)
    monkeypatch.setattr(vllm_memory, "KV_SAFETY_MIN_GIB", -1.0)
    monkeypatch.setattr(vllm_memory, "SAMPLER_BYTES_PER_LOGIT", 10.0)
    rows = [sizing_accuracy.measure(d) for d in sizing_accuracy.recorded()]
    assert sum(len(r.refused) for r in rows) > 0
