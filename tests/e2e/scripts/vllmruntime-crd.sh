#!/bin/sh
# Applies the VLLMRuntime CRD of the production-stack commit that kcl/versions.k pins
# (`production_stack_operator`), exactly as an InferenceCluster installs it
# (production_stack.py takes it from the offline render), and waits until the API server
# serves it. Used by tests/e2e/llm-local, which runs on a control plane without
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
