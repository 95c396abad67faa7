"""The stand-in for function-kcl on the control plane: `dot_inference/function_kcl/` (the
offline render's model of function-kcl v0.12.2, over kcl-lib) served over mTLS gRPC with the
function SDK, as a Crossplane function.

It runs only because function-kcl itself cannot be built here: the Go module proxy refuses
function-kcl v0.12.2 and every kcl-lang.io module (dot_inference/controlplane/build.py reports
the error at every start), and its native KCL library is not in any module the proxy serves.
What the control plane proves about the InferenceCluster composition is therefore what
Crossplane does with that program's answer, not function-kcl's own reading of it
(docs/control-plane.md).

    python -m dot_inference.controlplane.kcl_function --address 127.0.0.1:19443 \
        --tls-certs-dir DIR
"""

from __future__ import annotations

import argparse
import asyncio
import threading

import grpc
from crossplane.function import runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

from dot_inference import function_kcl

# One program at a time through kcl-lib's native service.
_KCL = threading.Lock()


def _run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    with _KCL:
        return function_kcl.run(req)


class KCLRunner(grpcv1.FunctionRunnerServiceServicer):
    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        # kcl-lib runs the program synchronously: off the event loop, so that the server
        # keeps answering meanwhile.
        return await asyncio.to_thread(_run, req)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="127.0.0.1:9443")
    parser.add_argument("--tls-certs-dir", required=True)
    args = parser.parse_args()
    creds = runtime.load_credentials(args.tls_certs_dir)
    runtime.serve(KCLRunner(), args.address, creds=creds, insecure=False)


if __name__ == "__main__":
    main()
