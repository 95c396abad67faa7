"""The control plane's PKI, generated at start: one CA signs every certificate (the API
server's, every client's, and the serving certificates of the webhooks and functions, whose
mTLS Crossplane and the functions require), and the service-account signing key pair.

Files go to one directory: `<name>.crt` and `<name>.key` for each certificate, `ca.crt`,
`ca.key`, `sa.key`, `sa.pub`; `tls_dir(name)` lays one out as `tls.crt`, `tls.key` and
`ca.crt`, the shape Crossplane and the function SDKs read (TLS_*_CERTS_DIR).
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The API server's names: on loopback, and as pods know it (the `kubernetes` Service).
API_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
API_SERVER_IPS = ("127.0.0.1", "10.96.0.1")


@dataclass(frozen=True)
class Client:
    name: str  # the file name
    user: str  # CN: the user the API server sees
    groups: tuple[str, ...] = ()


# Who talks to the API server with a certificate. The controller manager and the scheduler
# have the roles Kubernetes binds to their users; the rest act as cluster administrators
# (system:masters), as a single-node installer's do.
CLIENTS = (
    Client("admin", "kubernetes-admin", ("system:masters",)),
    Client("kube-controller-manager", "system:kube-controller-manager"),
    Client("kube-scheduler", "system:kube-scheduler"),
    Client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
    Client("kwok", "kwok", ("system:masters",)),
    # Crossplane core and the providers, out of cluster.
    Client("crossplane", "crossplane", ("system:masters",)),
)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str, groups: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    )


def _cert(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usages: tuple[x509.ObjectIdentifier, ...] = (),
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if dns or ips:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class PKI:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, name: str) -> Path:
        return self.root / name

    def generate(self) -> None:
        """A new CA and every certificate signed by it (the old ones are thrown away)."""
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        ca_key = _key()
        ca_name = _name("dot-inference control plane CA")
        ca = _cert(ca_name, ca_key, ca_name, ca_key, ca=True)
        _write_key(self.path("ca.key"), ca_key)
        _write_cert(self.path("ca.crt"), ca)

        def issue(
            name: str, subject: x509.Name, usage: x509.ObjectIdentifier, **sans: tuple[str, ...]
        ) -> None:
            key = _key()
            _write_key(self.path(f"{name}.key"), key)
            cert = _cert(subject, key, ca_name, ca_key, usages=(usage,), **sans)
            _write_cert(self.path(f"{name}.crt"), cert)

        issue(
            "apiserver",
            _name("kube-apiserver"),
            ExtendedKeyUsageOID.SERVER_AUTH,
            dns=API_SERVER_NAMES,
            ips=API_SERVER_IPS,
        )
        for client in CLIENTS:
            issue(client.name, _name(client.user, client.groups), ExtendedKeyUsageOID.CLIENT_AUTH)
        # Every server on loopback that another program dials over TLS: webhooks (Crossplane's,
        # provider-kubernetes'), functions.
        issue(
            "loopback",
            _name("dot-inference loopback server"),
            ExtendedKeyUsageOID.SERVER_AUTH,
            dns=("localhost",),
            ips=("127.0.0.1",),
        )
        sa = _key()
        _write_key(self.path("sa.key"), sa)
        self.path("sa.pub").write_bytes(
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def tls_dir(self, name: str, cert: str) -> Path:
        """A directory holding `cert` as tls.crt/tls.key and the CA as ca.crt."""
        out = self.root / "dirs" / name
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.path(f"{cert}.crt"), out / "tls.crt")
        shutil.copy(self.path(f"{cert}.key"), out / "tls.key")
        shutil.copy(self.path("ca.crt"), out / "ca.crt")
        return out

    def kubeconfig(self, path: Path, client: str, server: str) -> Path:
        """A kubeconfig for `client`'s certificate at `server`, with absolute file paths."""
        import yaml

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "dot-inference",
                    "cluster": {
                        "server": server,
                        "certificate-authority": str(self.path("ca.crt")),
                    },
                }
            ],
            "users": [
                {
                    "name": client,
                    "user": {
                        "client-certificate": str(self.path(f"{client}.crt")),
                        "client-key": str(self.path(f"{client}.key")),
                    },
                }
            ],
            "contexts": [
                {"name": "dot-inference", "context": {"cluster": "dot-inference", "user": client}}
            ],
            "current-context": "dot-inference",
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    def embedded_kubeconfig(self, client: str, server: str) -> str:
        """A kubeconfig with the certificates inline (for a Secret a provider reads)."""
        import base64

        import yaml

        def b64(name: str) -> str:
            return base64.b64encode(self.path(name).read_bytes()).decode()

        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "dot-inference",
                        "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")},
                    }
                ],
                "users": [
                    {
                        "name": client,
                        "user": {
                            "client-certificate-data": b64(f"{client}.crt"),
                            "client-key-data": b64(f"{client}.key"),
                        },
                    }
                ],
                "contexts": [
                    {
                        "name": "dot-inference",
                        "context": {"cluster": "dot-inference", "user": client},
                    }
                ],
                "current-context": "dot-inference",
            },
            sort_keys=False,
        )
