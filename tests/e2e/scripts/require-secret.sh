#!/bin/sh
# Fails a cloud suite at once, with the reason, when its credentials are missing
# (instead of waiting out the timeouts): require-secret.sh NAME [NAMESPACE]
set -eu
name=$1
namespace=${2:-crossplane-system}
if ! kubectl --namespace "$namespace" get secret "$name" >/dev/null 2>&1; then
  echo "Secret $namespace/$name not found: this suite needs cloud credentials." >&2
  echo "Create it (key 'creds'), then run tests/e2e/setup/install.sh again; see the suite's description." >&2
  exit 1
fi
echo "Secret $namespace/$name found"
