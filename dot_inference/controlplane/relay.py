"""A TCP relay: `kubernetes.default.svc:443` for the processes that run as if in a pod.

A kubeconfig that a composition writes for in-cluster use names the API server as
`https://kubernetes.default.svc` (a local InferenceCluster's models ProviderConfig does), which
a pod reaches through cluster DNS and kube-proxy. On the plane there are neither: the process
that reads such a kubeconfig (provider-kubernetes) runs in a mount namespace whose /etc/hosts
names the Service's names on loopback, and this relay carries port 443 there to the API
server's port. Bytes only: TLS stays between the client and the API server, whose certificate
names `kubernetes.default.svc`.

    python -m dot_inference.controlplane.relay --listen 127.0.0.1:443 --to 127.0.0.1:16443
"""

from __future__ import annotations

import argparse
import asyncio
import sys

# The names of the `kubernetes` Service in the default namespace, as a pod resolves them.
SERVICE_NAMES = (
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def hosts_file(original: str, address: str = "127.0.0.1") -> str:
    """/etc/hosts with the Service's names on `address`."""
    return original.rstrip("\n") + f"\n{address} {' '.join(SERVICE_NAMES)}\n"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(listen: tuple[str, int], to: tuple[str, int]) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*to)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, *listen)
    async with server:
        await server.serve_forever()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--listen", required=True, type=_address)
    parser.add_argument("--to", required=True, type=_address)
    args = parser.parse_args(argv)
    try:
        asyncio.run(serve(args.listen, args.to))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
