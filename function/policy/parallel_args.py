"""The data and expert parallel flags of a plan (function/model/sizing.py Plan): how one
replica's GPUs split a mixture of experts. Tensor and pipeline parallel sizes are written by
the backends beside the other engine settings (VLLMRuntime tensorParallelSize, `vllm serve`
in function/backends/pods.py).

vLLM 0.17.1 (vllm/engine/arg_utils.py `EngineArgs.create_engine_config`, config/parallel.py):
- `--data-parallel-size DP`: DP engine cores, each with its own scheduler and KV cache, behind
  one API server that balances requests over them (internal load balancing);
- `--data-parallel-size-local`: the cores on this node when a replica spans nodes. With
  `--nnodes`/`--node-rank` (which the multi-node pods already carry) vLLM infers each node's
  first DP rank as node_rank x local world size / (TP x PP), and the DP address falls back to
  `--master-addr` (the LeaderWorkerSet's leader), so no rank arithmetic is needed in the pod;
- `--enable-expert-parallel`: the experts are split over all TP x DP ranks instead of each
  expert's weights over the TP ranks (fused_moe/config.py `FusedMoEParallelConfig.make`).
"""

from __future__ import annotations

from function.model.sizing import Plan


def vllm_parallel_args(plan: Plan) -> list[str]:
    args: list[str] = []
    if plan.data_parallel_size > 1:
        args += ["--data-parallel-size", str(plan.data_parallel_size)]
        if plan.nodes > 1:
            args += ["--data-parallel-size-local", str(plan.data_parallel_local)]
    if plan.expert_parallel:
        args.append("--enable-expert-parallel")
    return args
