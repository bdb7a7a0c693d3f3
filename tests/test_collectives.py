"""DistContext and the statistics merged across ranks, in two real gloo processes."""

from __future__ import annotations

import datetime
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import free_port

from mjrl.distributed.context import DistContext
from mjrl.distributed.packing import NamedPack
from mjrl.rl.normalizer import RunningNormalizer, merge_into
from mjrl.rl.statistics import update_metrics


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
        empty = ctx.broadcast_text("")  # "no error" in restore_policy_everywhere
        weights = [torch.full((4,), float(rank)), torch.full((2, 2), 10.0 * rank, dtype=torch.float64)]
        ctx.broadcast_tensors(weights)
        gathered = ctx.all_gather(torch.tensor([rank, 2 * rank]))
        calls_before = ctx.comm.calls
        pack = NamedPack().add("counts", [rank + 1.0, 2.0]).add("slowest_s", 3.0 * rank, reduce="max")
        pooled = pack.add("signal", 15.0 * (1 - rank), reduce="max").all_gather(ctx)
        torch.save(
            {
                "mean": normalizer.mean,
                "var": normalizer.var,
                "count": normalizer.count,
                "text": text,
                "empty": empty,
                "weights": weights,
                "gathered": gathered,
                "comm_calls": ctx.comm.calls,
                "pack_calls": ctx.comm.calls - calls_before,
                "pooled": pooled,
            },
            Path(out) / f"{rank}.pt",
        )
    finally:
        dist.destroy_process_group()


def test_two_ranks_merge_statistics_and_broadcast_identically(tmp_path):
    mp.spawn(_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in (0, 1))
    pooled = np.concatenate([_rank_data(0), _rank_data(1)])
    for r in (r0, r1):
        np.testing.assert_allclose(r["mean"].numpy(), pooled.mean(0), rtol=1e-12)
        np.testing.assert_allclose(r["var"].numpy(), pooled.var(0), rtol=1e-10)
        assert r["count"].item() == len(pooled)
    assert torch.equal(r0["mean"], r1["mean"]) and torch.equal(r0["var"], r1["var"])  # bit-identical
    assert r1["text"] == "run dir ✓ from rank 0" and r0["empty"] == r1["empty"] == ""
    assert all(torch.equal(a, b) for a, b in zip(r0["weights"], r1["weights"], strict=True))
    assert torch.equal(r1["weights"][0], torch.zeros(4))  # rank 0's values reached rank 1
    assert torch.equal(r0["gathered"], torch.tensor([[0, 0], [1, 2]]))
    assert r0["comm_calls"] > 0
    # Named fields in one all_gather, each pooled by its own reduction.
    for r in (r0, r1):
        assert r["pack_calls"] == 1
        assert {k: v.tolist() for k, v in r["pooled"].items()} == {
            "counts": [3.0, 4.0],
            "slowest_s": 3.0,
            "signal": 15.0,
        }


# ---------------------------------------------------------------- PPO update: 2 ranks == 1 rank


def _rollout(envs: slice) -> dict:
    """A fixed synthetic rollout of 8 envs x 6 steps; `envs` selects this rank's share."""
    g = torch.Generator().manual_seed(7)
    shapes = {
        "actor_obs": (6, 8, 3),
        "critic_obs": (6, 8, 4),
        "actions": (6, 8, 2),
        "log_probs": (6, 8),
        "values": (6, 8),
        "rewards": (6, 8),
        "action_mean": (6, 8, 2),
    }
    data = {k: torch.randn(*shape, generator=g) for k, shape in shapes.items()}
    data["dones"] = (torch.rand(6, 8, generator=g) < 0.2).float()
    data["action_std"] = torch.ones(6, 8, 2)
    data["last_values"] = torch.randn(8, generator=g)
    return {k: (v[:, envs] if v.dim() > 1 else v[envs]) for k, v in data.items()}


def _update(ctx: DistContext, envs: slice, sync: str) -> dict:
    from mjrl.rl.config import PpoConfig
    from mjrl.rl.networks import ActorCritic
    from mjrl.rl.ppo import PPO

    torch.manual_seed(0)  # identical initial weights on every rank
    policy = ActorCritic(3, 4, 2, (16,), (16,), "elu", 1.0, normalize=True)
    cfg = PpoConfig(num_learning_epochs=3, num_mini_batches=1, sync=sync, learning_rate=1e-3)
    data = _rollout(envs)
    last_values = data.pop("last_values")
    ppo = PPO(policy, cfg, ctx, num_envs=last_values.numel(), num_steps=6)
    for name, value in data.items():
        ppo.storage.fields[name].copy_(value)
    sums = ppo.update_on(ppo.storage, last_values)
    state = {k: v.clone() for k, v in policy.state_dict().items()} | {"lr": torch.tensor(ppo.learning_rate)}
    return state | {f"sums/{k}": v for k, v in sums.items()}


def _update_worker(rank: int, port: int, out: str, sync: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    try:
        ctx = DistContext(device=torch.device("cpu"), rank=rank, world_size=2, local_world_size=2)
        state = _update(ctx, slice(4 * rank, 4 * rank + 4), sync)
        torch.save(state, Path(out) / f"{sync}-{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_ranks_with_half_the_data_update_exactly_like_one_rank_with_all(tmp_path):
    port = free_port()
    mp.spawn(_update_worker, args=(port, str(tmp_path), "gradients"), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"gradients-{r}.pt", weights_only=True) for r in (0, 1))
    single = _update(DistContext(device=torch.device("cpu")), slice(0, 8), "gradients")
    for key in (k for k in single if not k.startswith("sums/")):
        assert torch.equal(r0[key], r1[key]), key  # bit-identical replicas
        # Same maths as one rank on the pooled data (float32 sums in another order).
        torch.testing.assert_close(r0[key], single[key], rtol=1e-5, atol=1e-6, msg=key)
    assert not torch.equal(single["actor.0.weight"], _initial_actor_weight())  # the update did move it
    # The update's sums, added over the ranks (as the runner's gather does), give the figures
    # of one rank with all the data: the explained variance of the pooled rollout included.
    pooled = update_metrics({k[5:]: (r0[k] + r1[k]).item() for k in r0 if k.startswith("sums/")})
    alone = update_metrics({k[5:]: v.item() for k, v in single.items() if k.startswith("sums/")})
    assert pooled.keys() == alone.keys() and -1.0 < alone["explained_variance"] < 1.0
    for name in ("explained_variance", "clip_fraction"):
        assert abs(pooled[name] - alone[name]) < 1e-6, (name, pooled[name], alone[name])


def test_rollout_sync_mode_keeps_replicas_bit_identical(tmp_path):
    mp.spawn(_update_worker, args=(free_port(), str(tmp_path), "rollout"), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"rollout-{r}.pt", weights_only=True) for r in (0, 1))
    assert all(torch.equal(r0[k], r1[k]) for k in r0 if not k.startswith("sums/"))
    assert not torch.equal(r0["actor.0.weight"], _initial_actor_weight())


def _initial_actor_weight() -> torch.Tensor:
    from mjrl.rl.networks import ActorCritic

    torch.manual_seed(0)
    return ActorCritic(3, 4, 2, (16,), (16,), "elu", 1.0, normalize=True).state_dict()["actor.0.weight"]


def test_watchdog_never_sees_a_finished_long_collective_as_no_progress():
    """`exit_collective` runs on the main thread while the watchdog thread checks. A collective
    that lasted longer than the hang timeout (rank 0 evaluating) must not, read between two of
    its statements, look like a main thread without progress. A trace function runs the
    watchdog's check before every line of `exit_collective`: each point where a thread switch
    could happen, deterministically."""
    import sys

    from mjrl.distributed.watchdog import Watchdog

    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, 1, is_master=True, wait_for_workers=False)
    watchdog = Watchdog("127.0.0.1", port, "test", rank=0, world_size=1, hang_timeout_s=10.0)
    watchdog.arm()
    failures: list[str] = []
    watchdog._fail = failures.append  # record instead of ending the test process

    def trace(frame, event, arg):
        if frame.f_code is not Watchdog.exit_collective.__code__:
            return None
        if event in ("line", "return"):
            watchdog._check_self(time.monotonic())
        return trace

    watchdog.enter_collective()
    watchdog._last_progress = time.monotonic() - 60  # progress last seen long before
    sys.settrace(trace)
    try:
        watchdog.exit_collective()
    finally:
        sys.settrace(None)
        del store
    assert not failures, failures


# ------------------------------------------------- collective_s covers the wait for a slow peer

SLOW_PEER_S = 0.4


def _every_collective(ctx: DistContext) -> dict:
    """Each of DistContext's collectives once (rank 1 arrives late): what each one took on rank 0."""
    calls = {
        "all_reduce_sum": lambda: ctx.all_reduce_sum(torch.ones(3)),
        "all_reduce_mean": lambda: ctx.all_reduce_mean(torch.ones(3)),
        "all_gather": lambda: ctx.all_gather(torch.ones(3)),
        "broadcast": lambda: ctx.broadcast(torch.ones(3)),
        "broadcast_tensors": lambda: ctx.broadcast_tensors([torch.ones(3), torch.ones(2, dtype=torch.float64)]),
        "broadcast_text": lambda: ctx.broadcast_text("x" if ctx.rank == 0 else None),
        "barrier": ctx.barrier,
    }
    seconds = {}
    for name, call in calls.items():
        if ctx.rank == 1:
            time.sleep(SLOW_PEER_S)  # a slow peer: rank 0 waits for it inside the collective
        before = ctx.comm.seconds
        call()
        seconds[name] = ctx.comm.seconds - before
    return seconds


def _slow_peer_worker(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    try:
        ctx = DistContext(device=torch.device("cpu"), rank=rank, world_size=2, local_world_size=2)
        torch.save(_every_collective(ctx), Path(out) / f"{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_collective_time_covers_the_wait_for_a_slow_peer(tmp_path):
    """`collective_s` (and the watchdog's in-collective state, which shares its bracket) must
    include the time a rank waits for a slower peer, in every collective DistContext makes."""
    mp.spawn(_slow_peer_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    waited = torch.load(tmp_path / "0.pt", weights_only=True)
    short = {name: s for name, s in waited.items() if s < 0.75 * SLOW_PEER_S}
    assert not short, f"collective time on rank 0 misses the wait for rank 1: {short}"


# ------------------------------------------- start-up: a rank compiling on a cold kernel cache

COLLECTIVE_TIMEOUT_S = 3.0
COMPILING_S = 5.0  # longer than the collective timeout


def _late_rank_worker(rank: int, port: int, out: str) -> None:
    from mjrl.distributed.context import init_distributed

    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE="2",
        LOCAL_WORLD_SIZE="2",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    ctx = init_distributed("cpu", timeout_s=COLLECTIVE_TIMEOUT_S, hang_timeout_s=60.0)
    try:
        if rank == 1:
            time.sleep(COMPILING_S)  # building its env on a cold Warp kernel cache
        ctx.wait_for_all("env built", timeout_s=60.0)
        total = ctx.all_reduce_sum(torch.tensor([1.0 + rank])).item()  # the first collective
        error = ""
        if rank == 0:  # rank 1 never comes: a bounded wait with a clear error
            try:
                ctx.wait_for_all("never", timeout_s=0.5)
            except TimeoutError as exc:
                error = str(exc)
        torch.save({"total": total, "error": error}, Path(out) / f"{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_ranks_meet_after_building_envs_so_a_slow_compile_does_not_time_out_the_first_collective(tmp_path):
    mp.spawn(_late_rank_worker, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    r0, r1 = (torch.load(tmp_path / f"{r}.pt", weights_only=True) for r in (0, 1))
    assert r0["total"] == r1["total"] == 3.0
    assert r0["error"] == "only 1 of 2 ranks reached 'never' within 0.5 s"


def test_a_python_number_is_packed_in_the_packs_dtype():
    """Rank 0's learning rate reached the other ranks rounded to float32 (1e-3 became
    0.0010000000474974513): torch makes a float32 tensor of a Python float."""
    pack = NamedPack(torch.float64).add("learning_rate", 1e-3).add("counts", [0.1, 0.2])
    assert pack.flat().tolist() == [1e-3, 0.1, 0.2]
