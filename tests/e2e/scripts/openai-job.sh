#!/bin/sh
# Run tests/e2e/scripts/openai_client.py on the cluster, in a Job of the test's namespace,
# with the vLLM router's own image (python:3.12-slim based), read from the live router
# Deployment of the InferenceCluster: no image is pinned here.
#
#   NAMESPACE=<test namespace> sh ../scripts/openai-job.sh wait|start <job name> <client arguments>...
#
# `wait` waits for the Job and prints its output, failing as soon as a pod of it fails;
# `start` leaves it running (a load generator).
set -eu
mode=$1
name=$2
shift 2
ns=${NAMESPACE:?set NAMESPACE to the test namespace}
client=$(dirname "$0")/openai_client.py
image=$(kubectl -n "$ns" get deployment vllm-stack-deployment-router \
  -o jsonpath='{.spec.template.spec.containers[0].image}')
kubectl -n "$ns" delete job "$name" --ignore-not-found --wait=true
kubectl -n "$ns" create job "$name" --image="$image" -- python3 -c "$(cat "$client")" "$@"
if [ "$mode" = start ]; then
  exit 0
fi
# Up to 4 minutes: done when it succeeded, failed at its first failed pod.
i=0
while [ "$i" -lt 48 ]; do
  done=$(kubectl -n "$ns" get job "$name" -o jsonpath='{.status.succeeded}/{.status.failed}')
  case "$done" in
    1/*) kubectl -n "$ns" logs "job/$name"; exit 0 ;;
    */[1-9]*) kubectl -n "$ns" logs "job/$name" || true; exit 1 ;;
  esac
  sleep 5
  i=$((i + 1))
done
echo "job $name did not finish in 4 minutes" >&2
kubectl -n "$ns" logs "job/$name" || true
exit 1
