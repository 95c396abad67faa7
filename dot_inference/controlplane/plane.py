"""Bring the control plane up and down.

    python -m dot_inference.controlplane up      # build (once), start, install; idempotent
    python -m dot_inference.controlplane down    # stop every process, wipe etcd
    python -m dot_inference.controlplane status  # what runs, the gaps

State lives in `.control-plane/` of the checkout (git ignores it): `kubeconfig`, `pki/`,
`logs/`, `run/` (pid files, etcd's data), `state.json` (ports and what could not be built).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dot_inference import release
from dot_inference.controlplane import build, controllers, install
from dot_inference.controlplane.kube import Kube, is_true, wait
from dot_inference.controlplane.pki import PKI
from dot_inference.controlplane.procs import Processes, alive
from dot_inference.controlplane.where import (
    CROSSPLANE_NAMESPACE,
    PORTS,
    PROVIDER_SA,
    ROOT,
    SA_DIR,
    STATE,
    http_ok,
    say,
    tcp_open,
)
from dot_inference.pins import pin


@dataclass
class Plane:
    root: Path = STATE

    def __post_init__(self) -> None:
        self.pki = PKI(self.root / "pki")
        self.procs = Processes(self.root)
        self.kubeconfig = self.root / "kubeconfig"
        self.server = f"https://127.0.0.1:{PORTS['apiserver']}"

    # --- what runs ---------------------------------------------------------------------------

    def kube(self) -> Kube:
        return Kube(
            self.server,
            self.pki.path("ca.crt"),
            self.pki.path("admin.crt"),
            self.pki.path("admin.key"),
        )

    def state(self) -> dict[str, Any]:
        f = self.root / "state.json"
        return json.loads(f.read_text()) if f.is_file() else {}

    def running(self) -> bool:
        pids = self.procs.pids()
        wanted = self.state().get("processes") or []
        if not wanted or any(not alive(pids.get(n, -1)) for n in wanted):
            return False
        return self.kube().ready()

    # --- up ------------------------------------------------------------------------------------

    def up(self) -> dict[str, Any]:
        started = time.monotonic()
        built = build.build_all()
        if self.running():
            say(f"already up: KUBECONFIG={self.kubeconfig}")
            return self.state()
        self.down(quiet=True)
        self.root.mkdir(exist_ok=True)
        self.pki.generate()
        self.pki.kubeconfig(self.kubeconfig, "admin", self.server)
        bins = built.binaries
        self._kubernetes(bins)
        kube = self.kube()
        self._nodes(kube, bins, built)
        controllers.cluster_basics(kube)
        crossplane_src = build.source(built.components["crossplane"])
        self._crossplane(kube, bins, crossplane_src)
        hosts = controllers.start_relay(self)
        runs_local = self._provider_kubernetes(kube, bins, built, hosts)
        self._provider_helm(bins)
        self._functions(kube, bins)
        self._package(kube)
        self._controllers(kube, built)
        state = {
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "ports": PORTS,
            "processes": list(self.procs.pids()),
            "gaps": [g.__dict__ for g in built.gaps]
            + ([] if runs_local else [_NO_INJECTED_IDENTITY.__dict__])
            + ([] if hosts else [_NO_RELAY.__dict__]),
            "versions": {c.name: c.version for c in build.components()},
        }
        (self.root / "state.json").write_text(json.dumps(state, indent=2))
        say(f"up in {time.monotonic() - started:.0f} s: KUBECONFIG={self.kubeconfig}")
        for gap in state["gaps"]:
            say(f"not here: {gap['component']} {gap['version']}: {gap['error'].splitlines()[0]}")
        return state

    def _controllers(self, kube: Kube, built: build.Built) -> None:
        """The controllers that turn composed objects into pods (controllers.py)."""
        lws = built.components.get("lws") or built.components.get("lws-standin")
        if lws:
            controllers.start_lws(self, kube, built.binaries["lws-controller"], lws)
        if "keda" in built.components:
            controllers.start_keda(self, kube, built.binaries, built.components["keda"])
        controllers.start_operator_model(self)

    def _start(self, name: str, argv: list[str], **kw: Any) -> None:
        self.procs.start(name, argv, **kw)

    def _wait(self, name: str, check: Any, timeout: float, what: str) -> None:
        def ok() -> Any:
            self.procs.check(name)
            return check()

        wait(ok, timeout, what)

    def _kubernetes(self, bins: dict[str, Path]) -> None:
        p, k = PORTS, self.pki.path
        data = self.root / "run" / "etcd"
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o700)
        say("starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
        self._start(
            "etcd",
            [
                str(bins["etcd"]),
                "--name=control-plane",
                f"--data-dir={data}",
                f"--listen-client-urls=http://127.0.0.1:{p['etcd-client']}",
                f"--advertise-client-urls=http://127.0.0.1:{p['etcd-client']}",
                f"--listen-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{p['etcd-peer']}",
                f"--initial-cluster=control-plane=http://127.0.0.1:{p['etcd-peer']}",
                f"--listen-metrics-urls=http://127.0.0.1:{p['etcd-metrics']}",
                "--log-level=warn",
            ],
        )
        self._start(
            "kube-apiserver",
            [
                str(bins["kube-apiserver"]),
                f"--etcd-servers=http://127.0.0.1:{p['etcd-client']}",
                "--bind-address=127.0.0.1",
                f"--secure-port={p['apiserver']}",
                "--advertise-address=127.0.0.1",
                # An advertised loopback address cannot be the `kubernetes` Service's endpoint.
                "--endpoint-reconciler-type=none",
                f"--tls-cert-file={k('apiserver.crt')}",
                f"--tls-private-key-file={k('apiserver.key')}",
                f"--client-ca-file={k('ca.crt')}",
                f"--kubelet-client-certificate={k('apiserver-kubelet-client.crt')}",
                f"--kubelet-client-key={k('apiserver-kubelet-client.key')}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={k('sa.pub')}",
                f"--service-account-signing-key-file={k('sa.key')}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
            ],
        )
        kube = self.kube()
        self._wait("kube-apiserver", kube.ready, 90, "kube-apiserver ready")
        for name, port in (
            ("kube-controller-manager", "controller-manager"),
            ("kube-scheduler", "scheduler"),
        ):
            config = self.pki.kubeconfig(self.root / f"{name}.kubeconfig", name, self.server)
            extra = (
                [
                    f"--service-account-private-key-file={k('sa.key')}",
                    f"--root-ca-file={k('ca.crt')}",
                    "--use-service-account-credentials=true",
                    f"--cluster-signing-cert-file={k('ca.crt')}",
                    f"--cluster-signing-key-file={k('ca.key')}",
                    # Kubernetes' own provisioner for the default StorageClass (controllers.py).
                    "--enable-hostpath-provisioner=true",
                ]
                if name == "kube-controller-manager"
                else [f"--config={controllers.scheduler_config(self.root / 'run', config)}"]
            )
            self._start(
                name,
                [
                    str(bins[name]),
                    f"--kubeconfig={config}",
                    f"--authentication-kubeconfig={config}",
                    f"--authorization-kubeconfig={config}",
                    "--bind-address=127.0.0.1",
                    f"--secure-port={p[port]}",
                    "--leader-elect=false",
                    *extra,
                ],
            )
        install.wait_serviceaccount(kube, "default", 90)

    def _nodes(self, kube: Kube, bins: dict[str, Path], built: build.Built) -> None:
        say("starting kwok and its nodes")
        stages = build.source(built.components["kwok"]) / "kustomize" / "stage" / "fast"
        config = self.pki.kubeconfig(self.root / "kwok.kubeconfig", "kwok", self.server)
        self._start(
            "kwok",
            [
                str(bins["kwok"]),
                f"--kubeconfig={config}",
                "--manage-all-nodes=true",
                f"--config={stages}",
                "--node-lease-duration-seconds=40",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.0.0.1",
                f"--server-address=127.0.0.1:{PORTS['kwok']}",
            ],
        )
        from dot_inference.controlplane.nodes import nodes

        for node in nodes():
            kube.create(node) if not kube.get("v1", "Node", node["metadata"]["name"]) else None
        for node in nodes():
            name = node["metadata"]["name"]
            self._wait(
                "kwok",
                lambda n=name: is_true(kube.get("v1", "Node", n), "Ready"),
                60,
                f"node {name} Ready",
            )

    def _crossplane(self, kube: Kube, bins: dict[str, Path], source: Path) -> None:
        say(f"starting Crossplane {pin('crossplane')} (webhooks on)")
        install.namespace(kube, CROSSPLANE_NAMESPACE)
        install.install_crds(kube, install.crds([source / "cluster" / "crds"]))
        ca = self.pki.path("ca.crt").read_bytes()
        webhook = f"https://127.0.0.1:{PORTS['crossplane-webhook']}"
        kube.apply(install.no_usages_webhook(source, webhook, ca))
        cache = self.root / "run" / "crossplane"
        for d in ("xpkg", "xfn"):
            (cache / d).mkdir(parents=True, exist_ok=True)
        config = self.pki.kubeconfig(self.root / "crossplane.kubeconfig", "crossplane", self.server)
        self._start(
            "crossplane",
            [
                str(bins["crossplane"]),
                "core",
                "start",
                f"--metrics-port={PORTS['crossplane-metrics']}",
                f"--health-probe-port={PORTS['crossplane-health']}",
                f"--webhook-port={PORTS['crossplane-webhook']}",
                f"--xpkg-cache-dir={cache / 'xpkg'}",
                f"--xfn-cache-dir={cache / 'xfn'}",
            ],
            env={
                "KUBECONFIG": str(config),
                "POD_NAMESPACE": CROSSPLANE_NAMESPACE,
                "PACKAGE_RUNTIME": "External",
                "TLS_CLIENT_CERTS_DIR": str(self.pki.tls_dir("crossplane-client", "crossplane")),
                "TLS_SERVER_CERTS_DIR": str(self.pki.tls_dir("crossplane-server", "loopback")),
            },
        )
        self._wait(
            "crossplane",
            lambda: http_ok(f"http://127.0.0.1:{PORTS['crossplane-health']}/readyz"),
            90,
            "Crossplane ready",
        )

    def _provider_kubernetes(
        self, kube: Kube, bins: dict[str, Path], built: build.Built, hosts: Path | None
    ) -> bool:
        """provider-kubernetes at the pin, with the arguments install/provider-runtime.yaml
        gives it, as its ServiceAccount: inside a mount namespace of its own where that
        account's token is where a pod's is, so that it runs in-cluster (and a ProviderConfig
        with InjectedIdentity works) without touching the machine's files. Whether it could."""
        component = built.components["provider-kubernetes"]
        say(f"starting provider-kubernetes {component.version}")
        ca = self.pki.path("ca.crt").read_bytes()
        url = f"https://127.0.0.1:{PORTS['provider-kubernetes-webhook']}/convert"
        crds = install.crds([build.source(component) / "package" / "crds"])
        install.install_crds(kube, [install.webhook_url(c, url, ca) for c in crds])
        ns = CROSSPLANE_NAMESPACE
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": PROVIDER_SA, "namespace": ns},
            }
        )
        kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "dot-inference-provider-kubernetes"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": PROVIDER_SA, "namespace": ns}],
            }
        )
        token = kube.request(
            "POST",
            f"/api/v1/namespaces/{ns}/serviceaccounts/{PROVIDER_SA}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 86400},
            },
        )["status"]["token"]
        account = self.root / "run" / "provider-kubernetes-sa"
        account.mkdir(parents=True, exist_ok=True)
        (account / "token").write_text(token)
        (account / "namespace").write_text(ns)
        shutil.copy(self.pki.path("ca.crt"), account / "ca.crt")
        args = _runtime_args("provider-kubernetes")
        argv = [
            str(bins["provider-kubernetes"]),
            f"--health-probe-bind-addr=127.0.0.1:{PORTS['provider-kubernetes-health']}",
            *args,
        ]
        env = {
            "TLS_SERVER_CERTS_DIR": str(self.pki.tls_dir("provider-kubernetes", "loopback")),
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": str(PORTS["apiserver"]),
            "POD_NAMESPACE": ns,
        }
        in_cluster = _can_bind_mount()
        if in_cluster:
            script = f"mkdir -p {SA_DIR} && mount --bind {account} {SA_DIR} && "
            # In-cluster kubeconfigs name kubernetes.default.svc: the relay serves it.
            script += f"mount --bind {hosts} /etc/hosts && " if hosts else ""
            script += 'exec "$@"'
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                script,
                "sh",
                *argv,
            ]
        else:
            env["KUBECONFIG"] = str(
                self.pki.kubeconfig(self.root / "provider.kubeconfig", "crossplane", self.server)
            )
        self._start("provider-kubernetes", argv, env=env)
        self._wait(
            "provider-kubernetes",
            lambda: http_ok(f"http://127.0.0.1:{PORTS['provider-kubernetes-health']}/readyz"),
            60,
            "provider-kubernetes ready",
        )
        # Credentials a ProviderConfig of source Secret can name: this plane, as its
        # administrator (existing clusters pointing at the plane use it; tests/controlplane).
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "control-plane-kubeconfig", "namespace": ns},
                "type": "Opaque",
                "data": {
                    "kubeconfig": base64.b64encode(
                        self.pki.embedded_kubeconfig("crossplane", self.server).encode()
                    ).decode()
                },
            }
        )
        return in_cluster

    def _provider_helm(self, bins: dict[str, Path]) -> None:
        """provider-helm at the pin, where the module proxy serves it (its CRDs are installed
        with the package's either way: its Releases are accepted, whether or not installed)."""
        if "provider-helm" not in bins:
            return
        say("starting provider-helm")
        config = self.pki.kubeconfig(
            self.root / "provider-helm.kubeconfig", "crossplane", self.server
        )
        self._start(
            "provider-helm",
            [
                str(bins["provider-helm"]),
                f"--webhook-port={PORTS['provider-helm-webhook']}",
                f"--metrics-bind-address=127.0.0.1:{PORTS['provider-helm-metrics']}",
                f"--health-probe-bind-addr=127.0.0.1:{PORTS['provider-helm-health']}",
            ],
            env={
                "KUBECONFIG": str(config),
                "TLS_SERVER_CERTS_DIR": str(self.pki.tls_dir("provider-helm", "loopback")),
            },
        )

    def _functions(self, kube: Kube, bins: dict[str, Path]) -> None:
        say("starting the functions (mTLS) and registering them")
        certs = str(self.pki.tls_dir("functions", "loopback"))
        python = sys.executable
        ours = release.release().function_name
        servers = {
            "function-auto-ready": (
                [
                    str(bins["function-auto-ready"]),
                    f"--address=127.0.0.1:{PORTS['function-auto-ready']}",
                ],
                PORTS["function-auto-ready"],
            ),
            "function-dot-inference": (
                [
                    python,
                    "-m",
                    "function.main",
                    f"--address=127.0.0.1:{PORTS['function-dot-inference']}",
                ],
                PORTS["function-dot-inference"],
            ),
            # function-kcl itself where it could be built, else its model (kcl_function.py).
            "function-kcl": (
                [str(bins["function-kcl"]), f"--address=127.0.0.1:{PORTS['function-kcl']}"]
                if "function-kcl" in bins
                else [
                    python,
                    "-m",
                    "dot_inference.controlplane.kcl_function",
                    f"--address=127.0.0.1:{PORTS['function-kcl']}",
                ],
                PORTS["function-kcl"],
            ),
        }
        env = {"TLS_SERVER_CERTS_DIR": certs, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        for name, (argv, _) in servers.items():
            self._start(name, [*argv, f"--tls-certs-dir={certs}"], env=env, cwd=ROOT)
        for name, (_, port) in servers.items():
            self._wait(name, lambda p=port: tcp_open(p), 60, f"{name} listening")
        packages = _packages()
        for ref in _function_refs():
            server = (
                "function-dot-inference"
                if ref == ours
                else next(s for s in ("function-kcl", "function-auto-ready") if ref.endswith(s))
            )
            install.register_function(kube, ref, packages[ref], f"127.0.0.1:{servers[server][1]}")

    def _package(self, kube: Kube) -> None:
        say("installing the package: provider and app CRDs, XRDs, Compositions, install/")
        install.install_crds(
            kube, install.crds([ROOT / "schemas" / d for d in install.VENDORED_CRDS])
        )
        package = install.load([ROOT / "package"])
        xrds = [d for d in package if d.get("kind") == "CompositeResourceDefinition"]
        compositions = [d for d in package if d.get("kind") == "Composition"]
        install.apply_all(kube, xrds)
        install.wait_established(kube, xrds)
        install.apply_all(kube, compositions)
        install.valid_pipelines(kube, compositions)
        install.apply_all(kube, install.load([ROOT / "install"]))

    # --- down ------------------------------------------------------------------------------

    def down(self, quiet: bool = False) -> None:
        stopped = self.procs.stop_all()
        shutil.rmtree(self.root / "run", ignore_errors=True)
        (self.root / "state.json").unlink(missing_ok=True)
        if not quiet:
            say(f"down: stopped {', '.join(stopped) or 'nothing'}")


@dataclass
class _Gap:
    component: str
    version: str
    error: str


_NO_INJECTED_IDENTITY = _Gap(
    "provider-kubernetes in-cluster identity",
    "",
    "a mount namespace could not be made (unshare --mount): provider-kubernetes runs with a "
    "kubeconfig, so a ProviderConfig with InjectedIdentity (local clusters) cannot connect",
)


_NO_RELAY = _Gap(
    "kubernetes.default.svc",
    "",
    "port 443 on loopback could not be had: a kubeconfig that names the API server as in a "
    "pod (a local cluster's models ProviderConfig) cannot connect",
)


def _can_bind_mount() -> bool:
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", "mount -t tmpfs none /mnt"],
        capture_output=True,
    )
    return probe.returncode == 0


def _runtime_args(provider: str) -> list[str]:
    """The arguments install/provider-runtime.yaml's DeploymentRuntimeConfig gives `provider`'s
    container (the image it matches names the provider)."""
    docs = install.load([ROOT / "install" / "provider-runtime.yaml"])
    configs = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "DeploymentRuntimeConfig"}
    for image in (d for d in docs if d.get("kind") == "ImageConfig"):
        if any(provider in m.get("prefix", "") for m in image["spec"]["matchImages"]):
            config = configs[image["spec"]["runtime"]["configRef"]["name"]]
            containers = config["spec"]["deploymentTemplate"]["spec"]["template"]["spec"][
                "containers"
            ]
            return [
                a
                for c in containers
                if c.get("name") == "package-runtime"
                for a in c.get("args", [])
            ]
    return []


def _function_refs() -> list[str]:
    """The functions the Compositions call, by name."""
    names: list[str] = []
    for comp in install.load([ROOT / "package"]):
        if comp.get("kind") != "Composition":
            continue
        for step in comp["spec"].get("pipeline") or []:
            ref = step["functionRef"]["name"]
            if ref not in names:
                names.append(ref)
    return names


def _packages() -> dict[str, str]:
    """Function name (as Crossplane names a dependency: its repository path, `/` to `-`) ->
    package reference with the version it pins (kcl/versions.k; ours: pyproject)."""
    meta = yaml.safe_load((ROOT / "package" / "crossplane.yaml").read_text())
    rel = release.release()
    out: dict[str, str] = {}
    for dep in meta["spec"]["dependsOn"]:
        if dep.get("kind") != "Function":
            continue
        package = dep["package"]
        name = "-".join(package.split("/")[1:])
        repo = package.rsplit("/", 1)[-1]
        try:
            version = pin(repo.replace("-", "_"))
        except Exception:  # ours: not in kcl/versions.k, the project's own version
            version = rel.tag
        out[name] = f"{package}:{version}"
    return out


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    command = args[0] if args else "status"
    plane = Plane()
    if command == "up":
        if not shutil.which("go"):
            say(
                "up: no `go` on PATH; the plane builds every program from its Go module "
                "(Go 1.26 or newer, and the Go module proxy)"
            )
            return 1
        try:
            plane.up()
        except (TimeoutError, RuntimeError, build.BuildError) as err:
            say(f"up failed: {err}")
            say(
                f"each process's log is in {plane.root / 'logs'}; stop what runs with "
                "`./task control-plane-down`"
            )
            return 1
    elif command == "down":
        plane.down()
    elif command == "status":
        up = plane.running()
        print(json.dumps({"running": up, **plane.state()}, indent=2))
        return 0 if up else 1
    else:
        print(f"usage: {Path(sys.argv[0]).name} up|down|status", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
