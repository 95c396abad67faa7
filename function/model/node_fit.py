"""A plan fitted to its GPU node: cpu and memory lowered to what one pod may request there
(the node's allocatable less the model-cache Job's requests), shm to half the memory."""

from __future__ import annotations

from dataclasses import replace

from function.model.sizing import Plan, cpu_quantity, memory_quantity

# engine.shm's floor: NCCL's troubleshooting guide has containers run with `--shm-size=1g`
# (its shared-memory transport between a pod's GPUs fails on Docker's 64 MiB default).
SHM_FLOOR_MIB = 1024


def _millicores(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def _mib(memory: str) -> int:
    return int(memory[:-2]) * 1024 if memory.endswith("Gi") else int(memory[:-2])


def fit_to_node(plan: Plan, cpu_millicores: int, memory_mib: int, where: str) -> Plan:
    """Lower the plan's cpu and memory to what one pod may request on the GPU node (and
    shm to half the memory). `where` names the node for the message."""
    cpu, memory = _millicores(plan.cpu), _mib(plan.memory)
    room_cpu = max(100, cpu_millicores // 100 * 100)
    room_memory = max(256, memory_mib // 256 * 256)
    if cpu <= room_cpu and memory <= room_memory:
        return plan
    new_cpu, new_memory = min(cpu, room_cpu), min(memory, room_memory)
    shm = min(_mib(plan.shm_size), new_memory // 2 // 256 * 256)
    lowered = [
        f"{name} {old} -> {new}"
        for name, old, new in (
            ("cpu", plan.cpu, cpu_quantity(new_cpu)),
            ("memory", plan.memory, memory_quantity(new_memory)),
        )
        if old != new
    ]
    return replace(
        plan,
        cpu=cpu_quantity(new_cpu),
        memory=memory_quantity(new_memory),
        shm_size=memory_quantity(shm),
        host_capped=f"{', '.join(lowered)} to fit {where}",
    )


class ShmError(ValueError):
    """engine.shm outside its floor and ceiling: the message says which, and what fits."""


def with_shm(plan: Plan, asked_mib: int, field: str) -> Plan:
    """The plan with the /dev/shm the claim asks for: at least SHM_FLOOR_MIB, at most half the
    pod's memory (a memory-backed /dev/shm counts against the pod's memory limit, and the
    engine's processes need the other half: the default and the node fit hold the same)."""
    ceiling = _mib(plan.memory) // 2
    if asked_mib < SHM_FLOOR_MIB or asked_mib > ceiling:
        raise ShmError(
            f"{field}: {memory_quantity(asked_mib)} is outside what the engine's pod can hold; "
            f"use from {memory_quantity(SHM_FLOOR_MIB)} to {memory_quantity(ceiling)} (half of "
            f"its {plan.memory} memory: /dev/shm counts against it), or leave it out for "
            f"{plan.shm_size}"
        )
    return replace(plan, shm_size=memory_quantity(asked_mib))
