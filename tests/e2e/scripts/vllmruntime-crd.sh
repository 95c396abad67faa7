#!/bin/sh
# Applies the VLLMRuntime CRD of the production-stack release that kcl/versions.k pins
# (`production_stack_operator`), taken from the same operator manifest an InferenceCluster
# installs (production_stack.py finds its URL in the offline render), and waits until the
# API server serves it. Used by tests/e2e/llm-local, which runs on a control plane without
# the operator: the CRD is all an LLMInference needs to compose its VLLMRuntime.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python="$root/.venv/bin/python"
[ -x "$python" ] || python=python3
crd=vllmruntimes.production-stack.vllm.ai
"$python" "$here/production_stack.py" crds "$crd" \
  | kubectl apply --server-side --force-conflicts --field-manager=dot-inference-e2e --filename -
kubectl wait --for=condition=Established --timeout=120s "customresourcedefinition/$crd"
