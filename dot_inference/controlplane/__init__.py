"""A real control plane on the development machine, as plain processes (no containers).

Kubernetes (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl) built
from `k8s.io/kubernetes`, kwok's fake nodes (a CPU pool and a GPU pool), Crossplane core with
its webhooks, the functions the Configuration depends on, this checkout's function over mTLS,
provider-kubernetes; every program built from its Go module at the version `kcl/versions.k`
pins (`build.py`), its PKI generated at start (`pki.py`), the package installed the way
Crossplane would install it (`install.py`), brought up and down by `plane.py`:

    python -m dot_inference.controlplane up | down | status

(`./task control-plane-up`, `./task control-plane-down`). While it runs, its kubeconfig is
`.control-plane/kubeconfig`. docs/control-plane.md says what it proves and what it cannot.
"""
