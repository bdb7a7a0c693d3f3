"""DistContext and the statistics merged across ranks, in two real gloo processes."""

from __future__ import annotations

import datetime
import os
import socket
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mjrl.distributed.context import DistContext
from mjrl.rl.normalizer import RunningNormalizer
from mjrl.rl.ppo import merge_into


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_data(rank: int) -> np.ndarray:
    # Different sizes and distributions per rank: a count-weighted merge is required.
    rng = np.random.default_rng(rank)
    return rng.normal(loc=3.0 * rank, scale=1.0 + rank, size=(50 + 70 * rank, 3))


def _worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    ctx = DistContext(device=torch.device("cpu"), rank=rank, world_size=2, local_world_size=2)
    try:
        normalizer = RunningNormalizer(3)
        merge_into(normalizer, torch.tensor(_rank_data(rank)), ctx)
        text = ctx.broadcast_text("run dir ✓ from rank 0" if rank == 0 else None)
        weights = [torch.full((4,), float(rank)), torch.full((2, 2), 10.0 * rank, dtype=torch.float64)]
        ctx.broadcast_tensors(weights)
        gathered = ctx.all_gather(torch.tensor([rank, 2 * rank]))
        torch.save(
            {
                "mean": normalizer.mean,
                "var": normalizer.var,
                "count": normalizer.count,
                "text": text,
                "weights": weights,
                "gathered": gathered,
                "comm_calls": ctx.comm.calls,
            },
            Path(out) / f"{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def test_two_ranks_merge_statistics_and_broadcast_identically(tmp_path):
    mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in (0, 1))
    pooled = np.concatenate([_rank_data(0), _rank_data(1)])
    for r in (r0, r1):
        np.testing.assert_allclose(r["mean"].numpy(), pooled.mean(0), rtol=1e-12)
        np.testing.assert_allclose(r["var"].numpy(), pooled.var(0), rtol=1e-10)
        assert r["count"].item() == len(pooled)
    assert torch.equal(r0["mean"], r1["mean"]) and torch.equal(r0["var"], r1["var"])  # bit-identical
    assert r1["text"] == "run dir ✓ from rank 0"
    assert all(torch.equal(a, b) for a, b in zip(r0["weights"], r1["weights"], strict=True))
    assert torch.equal(r1["weights"][0], torch.zeros(4))  # rank 0's values reached rank 1
    assert torch.equal(r0["gathered"], torch.tensor([[0, 0], [1, 2]]))
    assert r0["comm_calls"] > 0
