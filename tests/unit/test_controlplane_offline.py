"""What of dot_inference/controlplane runs without the plane: the wrapper modules' go
directive, and `up` on a machine without Go (tests/controlplane needs the plane)."""

from __future__ import annotations

import pytest

from dot_inference.controlplane import build, plane

GO_LINES = [
    ("the module's own", "module x\n\ngo 1.24.13\n\nrequire y v1\n", "go 1.24.13"),
    ("toolchain beside it", "module x\n\ngo 1.26.0\n\ntoolchain go1.26.5\n", "go 1.26.0"),
    ("none: Go 1.21's rules", "module x\n", "go 1.21"),
]


@pytest.mark.parametrize(
    ("go_mod", "want"), [c[1:] for c in GO_LINES], ids=[c[0] for c in GO_LINES]
)
def test_a_wrapper_takes_the_built_module_s_go_directive(go_mod: str, want: str) -> None:
    assert build._go_line(go_mod) == want


def test_up_without_go_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(plane.shutil, "which", lambda _: None)
    assert plane.main(["up"]) == 1
    assert "no `go` on PATH" in capsys.readouterr().err


class _OneBadRuntime:
    """A plane with two VLLMRuntimes, the first of which the model cannot reconcile."""

    def __init__(self) -> None:
        self.reconciled: list[str] = []

    def list(self, api: str, kind: str) -> list[dict]:
        return [
            {"metadata": {"name": "odd", "namespace": "a"}, "spec": None},
            {"metadata": {"name": "fine", "namespace": "a"}, "spec": {}},
        ]


def test_one_runtime_the_operator_model_cannot_reconcile_never_stops_the_others(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dot_inference.controlplane import operator_model

    kube = _OneBadRuntime()

    def reconcile(_: object, runtime: dict) -> None:
        if runtime["spec"] is None:
            raise TypeError("'NoneType' object is not subscriptable")
        kube.reconciled.append(runtime["metadata"]["name"])

    monkeypatch.setattr(operator_model, "reconcile", reconcile)
    operator_model.reconcile_all(kube)  # type: ignore[arg-type]
    assert kube.reconciled == ["fine"]
    said = capsys.readouterr()
    assert "a/odd: TypeError: 'NoneType' object is not subscriptable" in said.out + said.err
