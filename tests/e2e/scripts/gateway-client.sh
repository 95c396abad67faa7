#!/bin/sh
# Call a model through a Gateway from this machine: forward the Gateway's Service (named
# after the Gateway by agentgateway) to a local port and run openai_client.py against the
# model's path there. No image is needed on the cluster.
#
#   sh ../scripts/gateway-client.sh <gateway namespace> <gateway> <path> <model name>...
set -eu
ns=$1
gateway=$2
path=$3
shift 3
port=18080
kubectl -n "$ns" port-forward "svc/$gateway" "$port:80" >/dev/null 2>&1 &
forward=$!
trap 'kill $forward 2>/dev/null || true' EXIT
i=0
until python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; do
  i=$((i + 1))
  [ "$i" -lt 30 ] || { echo "port-forward to $ns/$gateway did not open" >&2; exit 1; }
  sleep 1
done
python3 "$(dirname "$0")/openai_client.py" routes "http://127.0.0.1:$port$path" "$@"
