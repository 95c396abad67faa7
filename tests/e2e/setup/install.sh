#!/usr/bin/env bash
# Installs what the end-to-end suites need on a control plane that already runs Crossplane
# (`task cluster-create` creates the KinD cluster and installs Crossplane first):
#
#   1. setup/runtime.yaml: DeploymentRuntimeConfigs and RBAC for provider-kubernetes/-helm;
#   2. the Functions and Providers of package/crossplane.yaml, at the versions it pins
#      (setup/manifests.py), cloud providers only for the clouds whose credentials exist;
#   3. the XRDs, then the Compositions, of package/ (applied directly: the Configuration
#      package is not published for these tests);
#   4. ClusterProviderConfigs: `local` (InjectedIdentity) and, per cloud, `default`.
#
# Cloud credentials are Secrets in crossplane-system, key `creds`, created beforehand:
#   aws-creds    AWS shared-credentials (INI) file     -> suite tests/e2e/aws
#   azure-creds  `az ad sp create-for-rbac --sdk-auth` JSON -> suite tests/e2e/azure
#   gcp-creds    service-account key JSON              -> suite tests/e2e/google
#                (plus gcpProjectId in tests/e2e/values.yaml)
# E2E_CLOUDS=aws,azure,google overrides the detection (e.g. to install providers first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
[ -x "$python" ] || python=python3
manifests() { "$python" "$here/manifests.py" "$@"; }

if [ -z "${E2E_CLOUDS+x}" ]; then
  E2E_CLOUDS=""
  for pair in aws:aws-creds azure:azure-creds google:gcp-creds; do
    if kubectl --namespace crossplane-system get secret "${pair#*:}" >/dev/null 2>&1; then
      E2E_CLOUDS="${E2E_CLOUDS:+$E2E_CLOUDS,}${pair%%:*}"
    fi
  done
fi
echo "install.sh: clouds with credentials: ${E2E_CLOUDS:-none}" >&2

kubectl apply --filename "$here/runtime.yaml"
manifests packages --clouds "$E2E_CLOUDS" | kubectl apply --filename -
kubectl wait --for=condition=Healthy --timeout=900s providers.pkg.crossplane.io --all
kubectl wait --for=condition=Healthy --timeout=300s functions.pkg.crossplane.io --all

(cd "$root" && manifests definitions) | kubectl apply --filename -
kubectl wait --for=condition=Established --timeout=120s \
  compositeresourcedefinitions.apiextensions.crossplane.io --all
(cd "$root" && manifests compositions) | kubectl apply --filename -

# Family providers (provider-family-aws, ...) are installed as dependencies, after the first
# wait began: wait again, then retry until their ClusterProviderConfig CRDs are served.
providerconfigs=$(manifests providerconfigs --clouds "$E2E_CLOUDS")
kubectl wait --for=condition=Healthy --timeout=900s providers.pkg.crossplane.io --all
for attempt in $(seq 1 30); do
  if printf '%s\n' "$providerconfigs" | kubectl apply --filename -; then
    exit 0
  fi
  echo "install.sh: ProviderConfig CRDs not served yet (attempt $attempt), retrying" >&2
  sleep 10
done
echo "install.sh: could not apply the ClusterProviderConfigs" >&2
exit 1
