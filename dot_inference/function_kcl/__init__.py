"""function-kcl (crossplane-contrib/function-kcl v0.12.2) semantics on kcl-lib.

A step runner for offline render (see docs/architecture.md): ``run(req) -> rsp``. It runs the
inline KCL program of a ``krm.kcl.dev/v1alpha1`` ``KCLInput`` in-process with kcl-lib (through
``kcl_service``, which frees each reply kcl-lib's binding would keep) and turns its ``items``
into a RunFunctionResponse the way function-kcl does (upstream ``fn.go``, ``render.go``,
``pkg/resource/*.go``; krm-kcl ``pkg/edit``):

* ``option("params")`` is the input's ``spec.params`` with ``oxr``, ``dxr``, ``ocds``, ``dcds``,
  ``ctx``, ``extraResources`` and ``requiredResources`` set on top (same map, so a user param of
  one of those names is overwritten). ``option("items")`` is ``[]`` and ``option("resource_list")``
  a ResourceList whose ``functionConfig`` is the input as a KCLRun.
* The program's output is unwrapped as krm-kcl does: its ``items`` list, or, when the output has
  no ``items``, the whole output as one resource.
* Target ``Default`` (the default): an item of the XR's apiVersion and kind contributes only its
  ``status`` (merged into the desired XR's status); ``meta.krm.kcl.dev/v1alpha1`` items are
  Context, Conditions, Events, ExtraResources, RequiredResources, CompositeConnectionDetails;
  everything else is a composed resource named by ``krm.kcl.dev/composition-resource-name``
  (else ``metadata.name``) with readiness from ``krm.kcl.dev/ready``; both annotations are
  removed. Only ``Default`` is emulated: it is the target this Configuration uses; the others
  (``Resources``, ``PatchDesired``, ``PatchResources``, ``XR``) get a fatal result saying so.
* Every error becomes a fatal result (target Composite) with upstream's message; ``run`` never
  raises.

Offline limits: only inline sources (no ``oci://``, git, http or local paths) and no
``spec.dependencies``; those give a fatal result saying so.
"""

from __future__ import annotations

from dot_inference.function_kcl.common import (
    ANNOTATION_COMPOSITION_RESOURCE_NAME,
    ANNOTATION_READY,
    INPUT_API_VERSION,
    INPUT_KIND,
    META_API_VERSION,
    PROGRAM_FILENAME,
    KCLFunctionError,
)
from dot_inference.function_kcl.program import execute_kcl
from dot_inference.function_kcl.program import user_message as user_message
from dot_inference.function_kcl.step import run

__all__ = [
    "ANNOTATION_COMPOSITION_RESOURCE_NAME",
    "ANNOTATION_READY",
    "INPUT_API_VERSION",
    "INPUT_KIND",
    "META_API_VERSION",
    "PROGRAM_FILENAME",
    "KCLFunctionError",
    "execute_kcl",
    "run",
]
