"""Collectives inside the loop's graphs (issue 59), on the CPU: two gloo ranks whose rollout and
update are replayed by the emulation of CUDA graphs (`capture.py`), the update's all-reduces
recorded in its graph, log what their eager twins log bit for bit, in both `--algorithm.sync`
modes, through a checkpoint, a replica check and an iteration that one rank runs eagerly (a
fault injected there) while the other replays. A third process, alone with
`--force-collectives`, issues the collectives each of the two ranks issues (counted by a
dispatch mode) and logs exactly what it logs without them. PPO in both sync modes, and SAC."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import TINY_RUN, free_port, run_main
from torch.utils._python_dispatch import TorchDispatchMode

from mjrl.metrics_file import read_metrics

TASK = "Mjrl-Cartpole-Balance"
CASES = [("gradients", False), ("gradients", True), ("rollout", False), ("rollout", True), ("sac", False),
         ("sac", True)]  # fmt: skip
"""(PPO's --algorithm.sync, or SAC; emulated graphs) of every run, in every process."""
TIMINGS = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s"}


class CollectiveCounter(TorchDispatchMode):
    """Counts the collectives dispatched (`c10d` operations, eager, captured or replayed)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            self.counts[func._opname] += 1
        return func(*args, **(kwargs or {}))


def _config(log_root: Path, sync: str, graphed: bool):
    from mjrl.runner.config import TrainConfig
    from mjrl.tasks import load_task

    task = load_task(TASK)
    cfg = TrainConfig.for_task(task, "sac" if sync == "sac" else "ppo")
    if sync == "sac":  # an update after every 4 steps, from a ring of 8 steps
        algorithm = dataclasses.replace(cfg.algorithm, batch_size=32, buffer_steps=8, update_every=4, learning_starts=4)
    else:
        algorithm = dataclasses.replace(cfg.algorithm, num_mini_batches=2, sync=sync)
    return task, dataclasses.replace(
        cfg,
        env=dataclasses.replace(cfg.env, num_envs=8, episode_length_s=1.0),
        runner=dataclasses.replace(
            cfg.runner,
            num_steps_per_env=8,
            max_iterations=5,
            save_interval=2,
            replica_check_interval=2,
            cuda_graphs="on" if graphed else "off",
        ),
        algorithm=algorithm,
        device="cpu",
        logger="none",
        log_root=str(log_root),
        fault="nan@0:3",  # rank 0's actions not finite in iteration 3: that iteration runs eagerly there
    )


def _train(ctx, log_root: Path, sync: str, graphed: bool) -> dict:
    """One small run; what it logged (timings aside), its final weights' digest, its collectives."""
    from mjrl.runner.start import build_run

    task, cfg = _config(log_root, sync, graphed)
    runner = build_run(task, cfg, ctx)
    captured_before = ctx.comm.captured
    with CollectiveCounter() as counter:
        summary = runner.run()
    lines = read_metrics(runner.run_dir) if ctx.is_main else []
    return {
        "metrics": [{k: v for k, v in line.items() if k not in TIMINGS} for line in lines],
        "sha": summary["parameters_sha256"],
        "collectives": dict(counter.counts),
        "replays": runner.graphs.replays if runner.graphs is not None else 0,
        "captured": ctx.comm.captured - captured_before,
    }


def _process(index: int, port: int, out: str) -> None:
    """Processes 0 and 1: the two ranks of a gloo job. Process 2: one rank alone, with forced
    collectives and without."""
    import emulated_graphs  # noqa: F401  (`--runner.cuda-graphs on` replays the emulated graphs)

    from mjrl.distributed.context import DistContext, shutdown_distributed, single_process

    if index < 2:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=index, world_size=2, timeout=datetime.timedelta(seconds=120))
        ctx = DistContext(device=torch.device("cpu"), rank=index, world_size=2, local_world_size=2)
    else:
        ctx = single_process("cpu", collectives=True)
    root = Path(out) / f"process{index}"
    try:
        results = {
            f"{sync}/{graphed}": _train(ctx, root / f"{sync}-{graphed}", sync, graphed) for sync, graphed in CASES
        }
    finally:
        shutdown_distributed()
    if index == 2:  # the switch off: no process group, no collective
        alone = single_process("cpu")
        for sync in ("gradients", "rollout", "sac"):
            results[f"{sync}/off"] = _train(alone, root / f"{sync}-off", sync, False)
    (Path(out) / f"{index}.json").write_text(json.dumps(results))


@pytest.mark.heavy
def test_collectives_captured_in_the_loops_graphs_replay_as_the_eager_ones(tmp_path):
    mp.spawn(_process, args=(free_port(), str(tmp_path)), nprocs=3, join=True)
    rank0, rank1, alone = (json.loads((tmp_path / f"{i}.json").read_text()) for i in range(3))
    for sync in ("gradients", "rollout", "sac"):
        eager, graphed = rank0[f"{sync}/False"], rank0[f"{sync}/True"]
        # Replayed: iterations 0 and 3 eager on rank 0, 1 captured, 2 and 4 replayed (SAC: 2
        # segment pairs an iteration, the first of iteration 1 captured).
        segments = 2 if sync == "sac" else 1
        assert graphed["replays"] == 2 * (segments - 1 + 2 * segments)
        assert rank1[f"{sync}/True"]["replays"] == 2 * (segments - 1 + 3 * segments)
        assert graphed["captured"] > 0 and eager["captured"] == 0  # the update's collectives were in its graph
        assert graphed["metrics"][3]["nonfinite_resets"] > 0  # the fault did corrupt rank 0's actions
        assert graphed["metrics"] == eager["metrics"], sync
        assert graphed["sha"] == eager["sha"] == rank1[f"{sync}/True"]["sha"] == rank1[f"{sync}/False"]["sha"]
        # Replays issue the collectives the eager loop issues; every rank the same.
        assert graphed["collectives"] == eager["collectives"] == rank1[f"{sync}/True"]["collectives"]
        assert eager["collectives"]["allreduce_"] > 0 and eager["collectives"]["allgather_"] > 0
        if sync == "sac":  # the ring's NaN actions skip steps; on both ranks alike, as before
            assert any(line["gradient_steps"] > 0 for line in eager["metrics"])
        # One rank forced to issue its collectives issues each of them, and learns as without.
        for graphs in (False, True):
            assert alone[f"{sync}/{graphs}"]["collectives"] == eager["collectives"]
            assert alone[f"{sync}/{graphs}"]["metrics"] == alone[f"{sync}/off"]["metrics"]
            assert alone[f"{sync}/{graphs}"]["sha"] == alone[f"{sync}/off"]["sha"]
        assert alone[f"{sync}/off"]["collectives"] == {}


def test_the_switch_from_the_command_line(tmp_path):
    """`train --force-collectives True`: one process in a group of its own, said in one line,
    left at the end."""
    result = run_main("train", TASK, *TINY_RUN, "--runner.max-iterations", "1", "--force-collectives", "True",
                      "--log-root", str(tmp_path))  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "collectives: forced, in a process group of one on cpu" in result.stdout
    assert not dist.is_initialized()
