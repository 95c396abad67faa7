#!/bin/sh
# The second KinD cluster of the fleet-local suite: an InferenceCluster `provider: existing`
# the control plane (KinD `dot-inference`) reaches over Docker's `kind` network.
#
#   sh tests/e2e/scripts/kind-second-cluster.sh create     (task cluster-create-second)
#     Creates the KinD cluster secondCluster of tests/e2e/values.yaml unless it exists, and
#     on it the namespace traefik with the Service `node-port-80`: port 80 of the node's
#     address (externalIPs, kube-proxy takes it) to the Traefik the InferenceCluster installs.
#     The router's host there is the node's name, <secondCluster>-control-plane, which Docker's
#     DNS resolves in every KinD node (and so in the control plane's pods): the global
#     Gateway on the control plane reaches the model on this cluster by that name, on port 80.
#     Checks that the `kind` network's subnet is kindNetworkCIDR of tests/e2e/values.yaml
#     (the range the global Gateway's egress policy opens).
#
#   NAMESPACE=<test namespace> sh ../scripts/kind-second-cluster.sh secrets   (the suite's first step)
#     On the control plane, in NAMESPACE: the Secret kind-b-kubeconfig (`kind get kubeconfig
#     --internal`: the administrator, at the API server's name on the docker network) and
#     kind-b-models-kubeconfig (a token of the ServiceAccount dot-inference-models in
#     dot-inference-system on the second cluster, the identity models act with there; created
#     here if missing, the InferenceCluster adopts it). Run on every run: deleting the
#     InferenceCluster deletes that ServiceAccount, and its tokens with it.
#
# Needs kind, kubectl and (for `create`) docker. The control plane is kubectl's current
# context; `kind create cluster` switches it, so `create` switches it back.
set -eu
mode=${1:?usage: kind-second-cluster.sh create|secrets}
here=$(cd "$(dirname "$0")" && pwd)
values=$here/../values.yaml
second=$(sed -n 's/^secondCluster: *//p' "$values")
context=kind-$second
node=$second-control-plane
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

b() { kubectl --context "$context" "$@"; }

if ! kind get clusters 2>/dev/null | grep -qx "$second"; then
  if [ "$mode" != create ]; then
    echo "KinD cluster $second not found: run \`task cluster-create-second\` first." >&2
    exit 1
  fi
  previous=$(kubectl config current-context 2>/dev/null || true)
  kind create cluster --name "$second" --wait 120s
  if [ -n "$previous" ]; then
    kubectl config use-context "$previous"
  fi
fi

case "$mode" in
  create)
    cidr=$(sed -n 's/^kindNetworkCIDR: *//p' "$values")
    subnets=$(docker network inspect kind --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}')
    case " $subnets " in
      *" $cidr "*) ;;
      *)
        echo "the kind network's subnets are: $subnets; tests/e2e/values.yaml says" >&2
        echo "kindNetworkCIDR: $cidr. Set it to the IPv4 one (the global Gateway's egress" >&2
        echo "policy opens that range to reach the second cluster)." >&2
        exit 1
        ;;
    esac
    address=$(b get node "$node" \
      --output jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
    b create namespace traefik --dry-run=client --output yaml | b apply --filename -
    cat > "$work/service.yaml" <<EOF
apiVersion: v1
kind: Service
metadata:
  name: node-port-80
  namespace: traefik
spec:
  selector:
    app.kubernetes.io/name: traefik
  externalIPs:
    - $address
  ports:
    - name: web
      port: 80
      targetPort: web
EOF
    b apply --filename "$work/service.yaml"
    echo "$second: node $node at $address, port 80 to Traefik"
    ;;
  secrets)
    ns=${NAMESPACE:?set NAMESPACE to the test namespace}
    kind get kubeconfig --internal --name "$second" > "$work/admin"
    b create namespace dot-inference-system --dry-run=client --output yaml | b apply --filename -
    b --namespace dot-inference-system create serviceaccount dot-inference-models \
      --dry-run=client --output yaml | b apply --filename -
    token=$(b --namespace dot-inference-system create token dot-inference-models --duration 8h)
    ca=$(kubectl --kubeconfig "$work/admin" config view --raw --minify \
      --output jsonpath='{.clusters[0].cluster.certificate-authority-data}')
    server=$(kubectl --kubeconfig "$work/admin" config view --raw --minify \
      --output jsonpath='{.clusters[0].cluster.server}')
    cat > "$work/models" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: $second
    cluster:
      server: $server
      certificate-authority-data: $ca
users:
  - name: dot-inference-models
    user:
      token: $token
contexts:
  - name: models
    context:
      cluster: $second
      user: dot-inference-models
current-context: models
EOF
    for pair in kind-b-kubeconfig:admin kind-b-models-kubeconfig:models; do
      kubectl --namespace "$ns" create secret generic "${pair%%:*}" \
        --from-file "kubeconfig=$work/${pair#*:}" --dry-run=client --output yaml |
        kubectl apply --filename -
    done
    echo "Secrets kind-b-kubeconfig and kind-b-models-kubeconfig in $ns (server $server)"
    ;;
  *)
    echo "usage: kind-second-cluster.sh create|secrets" >&2
    exit 2
    ;;
esac
