"""Which device each rank trains on, from `--device auto|cpu|cuda|cuda:N`, its local rank and
the CUDA devices it sees; bad input (a GPU the ranks of a node would share unasked, a device
that is not there) is refused in one line. Decided for `DistContext` (`context.py`), for
`play` and for the built-in launcher's check before it starts its workers."""

from __future__ import annotations

import os

import torch

from mjrl.errors import UsageError


def resolve_device(spec: str, local_rank: int = 0, local_world_size: int = 1) -> torch.device:
    """Turn `--device auto|cpu|cuda|cuda:N` into the device of the rank with `local_rank`."""
    if spec == "cpu":
        return torch.device("cpu")
    named = _named_cuda_index(spec)
    if spec == "auto" and not torch.cuda.is_available():
        return torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    own = ranks_have_own_devices(local_world_size, count, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return torch.device("cuda", pick_cuda_device(spec, named, local_rank, local_world_size, count, own))


def _named_cuda_index(spec: str) -> int | None:
    """N of `cuda:N`; None for auto and cuda; bad input for anything else."""
    if spec in ("auto", "cuda"):
        return None
    prefix, _, index = spec.partition(":")
    if prefix != "cuda" or not index.isdigit():
        raise UsageError(f"--device {spec!r}: expected auto, cpu, cuda or cuda:N")
    return int(index)


def ranks_have_own_devices(local_world_size: int, device_count: int, visible_devices: str | None) -> bool:
    """Whether each rank of this node was given CUDA devices of its own (SLURM
    `--gpus-per-task`, or a launcher that sets CUDA_VISIBLE_DEVICES per rank). One process
    sees that as fewer devices than ranks on the node, with CUDA_VISIBLE_DEVICES set; without
    it, fewer devices than ranks means the ranks would have to share them."""
    return local_world_size > 1 and device_count < local_world_size and bool(visible_devices)


def pick_cuda_device(
    spec: str, named: int | None, local_rank: int, local_world_size: int, device_count: int, own_devices: bool
) -> int:
    """The index, among the devices this process sees, of its CUDA device. `named` is N of
    `--device cuda:N` (None for cuda and auto). With devices of its own, a rank takes device
    `local_rank % device_count` (the one it sees, when it sees one) and `cuda:N` means its own
    device N. When the ranks of a node share its devices, each needs one of its own, and
    `cuda:N` would put them all on GPU N."""
    if named is not None and local_world_size > 1 and not own_devices:
        raise UsageError(one_gpu_per_node(spec))
    if named is None and not own_devices and local_world_size > max(device_count, 1):
        raise UsageError(
            f"{local_world_size} processes per node but this node has {device_count} CUDA device(s); "
            "lower --nproc-per-node, give each rank a GPU of its own (CUDA_VISIBLE_DEVICES per rank, SLURM "
            "--gpus-per-task=1) or use --device cpu"
        )
    if device_count == 0:
        raise UsageError(f"--device {spec}: no CUDA device is available here; use --device cpu")
    if named is not None and named >= device_count:
        raise UsageError(f"--device {spec}: this process sees {device_count} CUDA device(s)")
    return named if named is not None else local_rank % device_count


def one_gpu_per_node(spec: str) -> str:
    """`--device cuda:N` names one GPU; several ranks of a node on it would share it unasked."""
    return (
        f"--device {spec} names one GPU, but several ranks run on this node and share its GPUs; use --device "
        "cuda (or auto): each rank takes cuda:<LOCAL_RANK> (select GPUs with CUDA_VISIBLE_DEVICES), or give "
        "each rank a GPU of its own (CUDA_VISIBLE_DEVICES per rank, SLURM --gpus-per-task=1)"
    )


def check_node_devices(spec: str, processes_per_node: int) -> None:
    """The built-in launcher's check, before it starts its workers: they all see this
    process's devices (it sets no CUDA_VISIBLE_DEVICES of their own), so they share them."""
    if spec == "cpu" or (spec == "auto" and not torch.cuda.is_available()):
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    last = processes_per_node - 1
    pick_cuda_device(spec, _named_cuda_index(spec), last, processes_per_node, count, own_devices=False)
