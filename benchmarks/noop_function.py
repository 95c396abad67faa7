"""A composition function that does nothing (copies the desired state through), served the
way function/main.py serves ours: the baseline `./task bench` divides our gRPC figures by."""

import sys

import grpc
from crossplane.function import response, runtime
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1


class NoOpRunner(grpcv1.FunctionRunnerService):
    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        return response.to(req)


if __name__ == "__main__":
    runtime.serve(NoOpRunner(), sys.argv[1], creds=None, insecure=True)
