"""What a run writes besides its checkpoints: every rank's log file, and on rank 0 the console
lines, config.yaml, metrics.jsonl, the experiment tracker and the training clips."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import yaml

from mjrl.checkpoint import remove_stale_temporaries
from mjrl.config import to_dict
from mjrl.distributed import DistContext
from mjrl.envs import VecEnv
from mjrl.errors import RESUME_HINT
from mjrl.files import make_dirs, write_text
from mjrl.metrics_file import NAME as METRICS
from mjrl.metrics_file import MetricsFile
from mjrl.runner.config import TrainConfig, experiment_config
from mjrl.runner.loggers import RankLog, Tracker, console_line
from mjrl.runner.state import TrainingState
from mjrl.sim.render import pick_gl_backend
from mjrl.tools.video import ClipRecorder


class RunOutputs:
    """The run directory's files and the trackers of one rank (rank 0 writes all but its own
    log file)."""

    def __init__(self, ctx: DistContext, run_dir: Path):
        self.ctx = ctx
        self.run_dir = run_dir
        self.rank_log: RankLog | None = None
        self.metrics_file: MetricsFile | None = None
        self.tracker: Tracker | None = None
        self.clips: ClipRecorder | None = None

    def open(
        self,
        task_name: str,
        cfg: TrainConfig,
        given: TrainConfig,
        state: TrainingState,
        resumed_at: int | None,
        env: VecEnv,
    ) -> None:
        """Rank 0 creates the run directory; then every rank opens its own log file in it."""
        ctx = self.ctx
        if ctx.is_main:
            make_dirs(self.run_dir, RESUME_HINT)
        ctx.barrier()
        self.rank_log = RankLog(self.run_dir / "ranks" / f"rank_{ctx.rank}.log", echo_stdout=ctx.is_main)
        self.rank_log.note(
            f"rank {ctx.rank} pid {os.getpid()} host {socket.gethostname()} "
            f"attempt {ctx.restart_count} device {ctx.device}"
        )
        if not ctx.is_main:
            return
        remove_stale_temporaries(self.run_dir)
        self._write_config(task_name, given, resumed_at)
        self.metrics_file = MetricsFile(self.run_dir / METRICS, state.iteration)
        self.tracker = Tracker(
            cfg.logger, self.run_dir, to_dict(cfg), cfg.wandb_project, cfg.run_name, state.tracker_id, state.iteration
        )
        if cfg.video_interval > 0:
            self.clips = ClipRecorder(
                pick_gl_backend(),
                env,
                max(1, round(cfg.video_seconds / env.step_dt)),
                self.run_dir / "videos",
                gif=cfg.logger == "tensorboard",
            )

    def _write_config(self, task_name: str, given: TrainConfig, resumed_at: int | None) -> None:
        """config.yaml is the run as first started and is never overwritten by a resume; each
        resume records its own config beside it, as config.resume-<iteration>.yaml."""
        name = "config.yaml" if resumed_at is None else f"config.resume-{resumed_at:06d}.yaml"
        text = yaml.safe_dump(experiment_config(task_name, given), sort_keys=False)
        write_text(self.run_dir / name, text, RESUME_HINT)

    def print_header(self, task_name: str, cfg: TrainConfig, iteration: int) -> None:
        ctx = self.ctx
        if not ctx.is_main:
            return
        total = cfg.env.num_envs * ctx.world_size
        envs = f"{total} envs" if ctx.world_size == 1 else f"{total} envs ({cfg.env.num_envs} x {ctx.world_size} ranks)"
        start = f" | resuming at iteration {iteration}" if iteration else ""
        print(f"mjrl {task_name} | {ctx.device} | {envs} | seed {cfg.seed}{start}", flush=True)
        print(f"run  {self.run_dir}", flush=True)
        if ctx.world_size > 1 and len(set(nodes := ctx.rank_nodes())) > 1:
            # Which ranks each node runs: a scheduler's report of a dead node then names its ranks.
            print(f"nodes {describe_nodes(nodes)}", flush=True)

    def log(self, metrics: dict[str, Any], max_iterations: int, eta_s: float) -> None:
        if not self.ctx.is_main:
            return
        self.metrics_file.write(metrics)
        self.tracker.log(metrics, step=metrics["iteration"])
        print(console_line(metrics, max_iterations, eta_s), flush=True)

    def log_clips(self, final: bool = False, wait: bool = True) -> None:
        """Log the training clips that the drawing process has finished. `final`: stop recording
        and, with `wait`, wait for the pending clips."""
        if self.clips is None:
            return
        finished = self.clips.close(wait=wait) if final else self.clips.finished()
        if final:
            self.clips = None
        for iteration, path in finished:
            self.tracker.log_video("video", path, step=iteration)
            print(f"video {path}", flush=True)

    def sync(self) -> None:
        """metrics.jsonl on disk up to the checkpoint about to be written."""
        if self.metrics_file is not None:
            self.metrics_file.sync()

    def close(self, wait_for_clips: bool) -> None:
        self.log_clips(final=True, wait=wait_for_clips)
        if self.rank_log is not None:
            self.rank_log.close()
        if self.metrics_file is not None:
            self.metrics_file.close()
        if self.tracker is not None:
            self.tracker.close()


def describe_nodes(nodes: list[str]) -> str:
    """`node1: ranks 0-3 | node2: ranks 4-7` from each rank's node, in rank order."""
    ranks: dict[str, list[int]] = {}
    for rank, node in enumerate(nodes):
        ranks.setdefault(node, []).append(rank)
    return " | ".join(f"{node}: {_rank_runs(r)}" for node, r in ranks.items())


def _rank_runs(ranks: list[int]) -> str:
    """`rank 2`, `ranks 0-3` or `ranks 0, 2`: ascending ranks, consecutive ones as a range."""
    runs: list[list[int]] = []
    for rank in ranks:
        if runs and runs[-1][-1] == rank - 1:
            runs[-1].append(rank)
        else:
            runs.append([rank])
    text = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    return f"rank {text}" if len(ranks) == 1 else f"ranks {text}"
