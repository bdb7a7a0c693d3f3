"""The distributed context: rank, local rank, world size and device of this process.

Every piece of code that does I/O, reduces a statistic or chooses a device asks this object.
With one process every reduction is the identity, so single-process code pays nothing.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.distributed as dist

from mjrl.errors import UsageError


def resolve_device(spec: str, local_rank: int = 0) -> torch.device:
    """Turn `--device auto|cpu|cuda|cuda:N` into the device of the rank with `local_rank`."""
    if spec == "cpu":
        return torch.device("cpu")
    if spec == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    if spec == "cuda" or spec.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise UsageError(f"--device {spec}: no CUDA device is available here; use --device cpu")
        index = local_rank if spec == "cuda" else int(spec.split(":", 1)[1])
        if index >= torch.cuda.device_count():
            raise UsageError(f"--device {spec}: this machine has {torch.cuda.device_count()} CUDA device(s)")
        return torch.device(f"cuda:{index}")
    raise UsageError(f"--device {spec!r}: expected auto, cpu, cuda or cuda:N")


@dataclasses.dataclass(frozen=True)
class DistContext:
    """Where this process sits in the job. Created once by the CLI and passed down."""

    device: torch.device
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0 alone writes run directories, checkpoints and logs."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum `tensor` over all ranks, in place; returns it."""
        if self.is_distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Average `tensor` over all ranks, in place; returns it."""
        if self.is_distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
            tensor /= self.world_size
        return tensor

    def all_reduce_max(self, tensor: torch.Tensor) -> torch.Tensor:
        """Maximum of `tensor` over all ranks, in place; returns it."""
        if self.is_distributed:
            dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """Copy rank `src`'s `tensor` to every rank, in place; returns it."""
        if self.is_distributed:
            dist.broadcast(tensor, src=src)
        return tensor

    def barrier(self) -> None:
        if self.is_distributed:
            dist.barrier()


def single_process(device: str = "auto") -> DistContext:
    """The context of a plain one-process run."""
    return DistContext(device=resolve_device(device))
