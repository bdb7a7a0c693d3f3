"""The training loop: collect a rollout, update the algorithm, log, checkpoint, repeat.

`train()` is the whole job of one rank. It validates the config, resolves a resume, builds the
env and the algorithm, then runs `Runner.run()`. The loop drives the algorithm through the
`mjrl.rl.Algorithm` interface alone (PPO is one implementation). Only the main rank writes
anything to disk.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from mjrl.checkpoint import checkpoint_path, save_bulk_state, save_checkpoint
from mjrl.config import to_dict
from mjrl.distributed import DistContext, usable_cores
from mjrl.distributed.preemption import Preempted, StopFlag
from mjrl.envs import Task, VecEnv
from mjrl.rl import AgentConfig, Algorithm
from mjrl.rl.algorithm import rollout_step, update_every
from mjrl.runner.config import TrainConfig
from mjrl.runner.graphs import LoopGraphs
from mjrl.runner.hooks import LoopHook
from mjrl.runner.metrics import episode_metrics, gauge_metrics, pack_iteration, term_metrics
from mjrl.runner.outputs import RunOutputs
from mjrl.runner.state import (
    TrainingState,
    checkpoint_contents,
    gather_env_states,
)
from mjrl.tools.evaluate import run_episodes
from mjrl.tools.export import default_output, export_policy


@dataclasses.dataclass
class RunParts:
    """What `mjrl.runner.start.build_run` builds a run of, for the `Runner` to drive."""

    task: Task[AgentConfig]
    env: VecEnv
    algorithm: Algorithm
    run_dir: Path
    """Where rank 0 writes the run (config, metrics, checkpoints)."""
    state: TrainingState
    """The run's counters: fresh, or those of the checkpoint it resumed from."""
    resumed: bool
    """Whether the run continues from a checkpoint."""


class Runner:
    def __init__(
        self,
        parts: RunParts,
        cfg: TrainConfig,
        ctx: DistContext,
        *,
        stop: StopFlag | None = None,
        given: TrainConfig | None = None,
        graphs: LoopGraphs | None = None,
        hooks: Sequence[LoopHook] = (),
    ):
        self.task = parts.task
        self.task_name = parts.task.name
        self.cfg = cfg
        self.given = given or cfg  # the config as the user gave it (before the launcher's changes)
        self.resumed_at = parts.state.iteration if parts.resumed else None
        self.ctx = ctx
        self.env = parts.env
        self.algorithm = parts.algorithm
        self.run_dir = parts.run_dir
        self.state = parts.state
        self.outputs = RunOutputs(ctx, parts.run_dir)
        self.hooks = list(hooks)
        """Code added at the loop's fixed points (`runner/hooks.py`: `--fault`'s injections)."""
        self.hooked_iteration = False  # a hook acts inside this iteration's rollout
        self.update_threads = max(1, usable_cores() // ctx.local_world_size)
        """CPU threads for the update with automatic threads: this rank's share of the cores
        this process may use (looked up once, not at every iteration)."""
        self.stop = stop or StopFlag()
        self.learned_this_iteration = False
        """Whether an update has run in this iteration (an algorithm that learns every N steps):
        the policy is no longer the last completed iteration's, so a stop does not save it early."""
        self.saved_on_stop = False
        self.stop_checkpoint: Path | None = None
        """On rank 0, a checkpoint `_save_on_stop` created, deleted once the stop's own is written."""
        self.env_states: list[dict[str, torch.Tensor]] = []
        """On rank 0, every rank's env state when last gathered (`gather_env_states`)."""
        self.last_checkpoint: Path | None = None
        self.eval_env: VecEnv | None = None
        self.graphs = graphs
        """The rollout and the update as graphs (`--runner.cuda-graphs`); None: eager."""

    # ------------------------------------------------------------------------- the loop

    def run(self) -> dict[str, Any]:
        self.outputs.open(self.task_name, self.cfg, self.given, self.state, self.resumed_at, self.env)
        self.outputs.print_header(self.task_name, self.cfg, self.state.iteration)
        if self.ctx.watchdog is not None:
            self.ctx.watchdog.arm()
        # A save before the first checkpoint interval (a stop signal) then keeps every rank's
        # env state too: what a resume just restored, or the fresh one.
        self.gather_env_states()
        max_it = self.cfg.runner.max_iterations
        metrics: dict[str, Any] = {}
        session_start, session_iterations = time.perf_counter(), 0
        saved_at_s = self.state.wall_s  # the training time of the last checkpoint
        stop_signal = 0
        try:
            while self.state.iteration < max_it:
                metrics, stop_signal = self._iterate(session_iterations)
                self.state.iteration += 1
                if not stop_signal:
                    metrics.update(self._evaluate_if_due())
                session_iterations += 1
                per_iteration = (time.perf_counter() - session_start) / session_iterations
                self.outputs.log(metrics, max_it, eta_s=per_iteration * (max_it - self.state.iteration))
                self.outputs.log_clips()
                if stop_signal:
                    break
                self._check_replicas()
                if self._save_due(saved_at_s) and self.state.iteration < max_it:
                    self.gather_env_states()
                    self.save()
                    saved_at_s = self.state.wall_s
            # Every rank leaves the loop after the same iteration. What is left after this last
            # collective (the last checkpoint, the export, closing the trackers) is rank 0's
            # alone, so however long it takes it is not a hang.
            self.gather_env_states()
            if self.ctx.watchdog is not None:
                self.ctx.watchdog.disarm()
            self._hooks_at_iteration_start()
            checkpoint = self.save()
            self._drop_stop_checkpoint()
            if stop_signal:
                raise Preempted(stop_signal, self.state.iteration, checkpoint, self.run_dir)
            self._export()
        finally:
            # Stopped by a signal, the run does not wait for the clips still being drawn.
            self.outputs.close(wait_for_clips=not self.stop.requested)
        return {
            "rank": self.ctx.rank,
            "parameters_sha256": parameters_sha256(self.algorithm.inference_policy()),
            "run_dir": str(self.run_dir),
            "iterations": self.state.iteration,
            "env_steps": self.state.env_steps,
            "checkpoint": str(self.last_checkpoint) if self.last_checkpoint else None,
            "final_metrics": metrics,
        }

    def _iterate(self, session_iterations: int) -> tuple[dict[str, Any], int]:
        """One iteration: the hooks, a clip started if due, the rollout in segments each
        followed by an update (eager, or their graphs), then its metrics over every rank and
        the stop decision."""
        self._hooks_at_iteration_start()
        clips = self.outputs.clips
        if clips is not None and self.state.iteration % self.cfg.video_interval == 0:
            clips.start(self.state.iteration)
        eager = self._eager_iteration(session_iterations)
        steps = self.cfg.runner.num_steps_per_env
        every = update_every(self.algorithm) or steps
        clock = SegmentClock(self.ctx.device)
        comm_before = self.ctx.comm.seconds
        update_sums: dict[str, torch.Tensor] = {}
        self.learned_this_iteration = False
        for _ in range(steps // every):
            clock.mark("collection_s")
            self._segment("rollout", lambda: self.collect(every), eager)
            clock.mark("learning_s")
            with self._update_threads():
                sums = self._segment("update", self.algorithm.update, eager)
            self.learned_this_iteration = True
            # A replayed graph rewrites its result: an iteration of several updates adds copies.
            update_sums = sums if steps == every else add_sums(update_sums, sums)
        times = clock.read()
        collective_s = self.ctx.comm.seconds - comm_before
        return self._iteration_metrics(times["collection_s"], times["learning_s"], collective_s, update_sums)

    def _segment(self, name: str, fn: Callable[[], Any], eager: bool) -> Any:
        """`fn()`, or its graph's capture or replay (`--runner.cuda-graphs`), after a heartbeat to
        the watchdog: a replay runs none of the rollout's Python, its per-step heartbeats
        included, and a run of replayed iterations was otherwise stopped as hung."""
        self.ctx.progress()
        return fn() if self.graphs is None else self.graphs.run(name, fn, eager)

    def _eager_iteration(self, session_iterations: int) -> bool:
        """Whether this iteration needs Python inside its rollout, so runs eagerly: a session's
        first (what is made at a first use, made outside the graphs), one whose video is being
        recorded, one a hook acts in (a fault injected into the actions), or after a stop was
        asked for (which the rollout's steps check)."""
        clips = self.outputs.clips
        recording = clips is not None and clips.recording
        return session_iterations == 0 or recording or self.hooked_iteration or self.stop.requested

    @contextlib.contextmanager
    def _update_threads(self) -> Iterator[None]:
        """On the CPU with automatic threads, the update's matrix products get this rank's share
        of the cores this process may use; the rollout keeps one thread."""
        if self.ctx.device.type != "cpu" or self.cfg.torch_threads > 0:
            yield
            return
        before = torch.get_num_threads()
        torch.set_num_threads(self.update_threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    @torch.no_grad()
    def collect(self, steps: int | None = None) -> None:
        """`steps` env steps (default: the whole rollout): the algorithm acts and sees each
        transition; one that learns once per rollout then computes its returns."""
        env, algorithm, clips = self.env, self.algorithm, self.outputs.clips
        obs = env.obs
        for _ in range(steps or self.cfg.runner.num_steps_per_env):
            self.ctx.progress()
            if self.stop.requested and not self.saved_on_stop and not self.learned_this_iteration:
                self._save_on_stop()
            obs = rollout_step(env, algorithm, obs, self._hooked_actions if self.hooks else None)
            if clips is not None and clips.recording:
                clips.record(env)
        if not update_every(algorithm):
            algorithm.compute_returns(obs)

    def _hooked_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions as the hooks hand them to the env."""
        for hook in self.hooks:
            actions = hook.actions(actions)
        return actions

    # -------------------------------------------------------------------------- metrics

    def _iteration_metrics(
        self, collection_s: float, learning_s: float, collective_s: float, update_sums: dict[str, torch.Tensor]
    ) -> tuple[dict[str, Any], int]:
        """This iteration's metrics over every rank, and the stop decision: the signal that asked
        some rank to stop (SIGTERM/SIGINT), or 0. Folding the decision into the one gather
        makes every rank stop after the same iteration, wherever its signal arrived."""
        ctx, env = self.ctx, self.env
        if not ctx.is_main:  # goes to this rank's log file only
            it = self.state.iteration + 1
            print(f"rank {ctx.rank} it {it}: coll {collection_s:.2f}s learn {learning_s:.2f}s", flush=True)
        timings = {"collection_s": collection_s, "learning_s": learning_s, "collective_s": collective_s}
        values = self.algorithm.log_values()
        totals = pack_iteration(env, update_sums, values, timings, self.stop.requested).all_gather_values(ctx)
        step_count = self.cfg.runner.num_steps_per_env * env.num_envs * ctx.world_size
        self.state.env_steps += step_count
        self.state.wall_s += totals["collection_s"] + totals["learning_s"]
        metrics = {
            "iteration": self.state.iteration,
            "env_steps": self.state.env_steps,
            "wall_s": round(self.state.wall_s, 3),
            **episode_metrics(totals),
            "steps_per_second": step_count / (totals["collection_s"] + totals["learning_s"]),
            **{name: totals[name] for name in timings},
            **self.algorithm.update_metrics(totals),
            **term_metrics(totals, env.term_names()),
            **gauge_metrics(totals),
        }
        return metrics, int(totals["stop_signal"])

    def _evaluate_if_due(self) -> dict[str, Any]:
        """`eval/<figure>` of the deterministic policy, on rank 0 every `eval_interval` iterations.
        The other ranks wait for it at the next collective; its heartbeats keep the watchdog calm."""
        interval, last = self.cfg.runner.eval_interval, self.state.iteration == self.cfg.runner.max_iterations
        if not self.ctx.is_main or interval <= 0 or (self.state.iteration % interval and not last):
            return {}
        if self.eval_env is None:
            env_cfg = self.cfg.env.for_evaluation(self.cfg.runner.eval_envs)
            self.eval_env = VecEnv(env_cfg, self.task.build(env_cfg), self.ctx.device, seed=self.cfg.seed + 1_000_003)
        start = time.perf_counter()
        env, policy = self.eval_env, self.algorithm.inference_policy()
        episodes = run_episodes(env, policy, env.num_envs, self.task.play_metrics, self.ctx.progress)
        summary = {k: v for k, v in episodes.summary().items() if k not in ("min_return", "max_return")}
        return {**{f"eval/{k}": v for k, v in summary.items()}, "eval/seconds": time.perf_counter() - start}

    def _export(self) -> None:
        """`--export FORMAT`: the final policy, once training has finished (rank 0)."""
        if not self.ctx.is_main or self.cfg.export == "none" or self.last_checkpoint is None:
            return
        source = {
            "task": self.task_name,
            "run_dir": self.run_dir,
            "checkpoint": self.last_checkpoint,
            "iteration": self.state.iteration,
            "env_steps": self.state.env_steps,
        }
        out = default_output(self.run_dir, self.cfg.export)
        export_policy(self.env, self.algorithm.inference_policy(), self.cfg.export, out, source)
        print(f"exported {out}", flush=True)

    def _hooks_at_iteration_start(self) -> None:
        """Every hook's turn before an iteration (and before the last save)."""
        acting = [hook.iteration_start(self.state.iteration, self.algorithm) for hook in self.hooks]
        self.hooked_iteration = any(acting)

    def _check_replicas(self) -> None:
        interval = self.cfg.runner.replica_check_interval
        if not self.ctx.issues_collectives or interval <= 0 or self.state.iteration % interval:
            return
        sums = self.ctx.all_gather(self.algorithm.parameter_checksum())
        differ = [r for r in range(self.ctx.world_size) if not torch.equal(sums[r], sums[0])]
        if differ:
            raise ReplicaMismatch(
                f"after iteration {self.state.iteration} the parameters of rank(s) {differ} differ from rank 0's; "
                "data-parallel training lost lockstep"
            )

    def _save_on_stop(self) -> None:
        """A stop was asked for: the ranks will agree to stop at the end of this iteration, but
        when the signal came from the launcher because a peer died, this iteration's collectives
        fail. Rank 0 checkpoints the last completed iteration now, so it is never lost; the
        policy has not changed since it completed (not called once an algorithm that learns
        every N steps has updated in this iteration). A file this creates is kept in mind for
        `_drop_stop_checkpoint`."""
        self.saved_on_stop = True
        # Not a file already there: the periodic one, or the one this session resumed from.
        created = not checkpoint_path(self.run_dir, self.state.iteration).exists()
        path = self.save()
        if created:
            self.stop_checkpoint = path

    def _drop_stop_checkpoint(self) -> None:
        """The iteration a stop interrupted completed after all, and its checkpoint is written:
        the one `_save_on_stop` created of the iteration before is now only clutter (each stop
        would otherwise leave two checkpoints). Failing to delete it does not fail the stop."""
        if self.stop_checkpoint is not None:
            with contextlib.suppress(OSError):
                self.stop_checkpoint.unlink()
            self.stop_checkpoint = None

    def gather_env_states(self) -> None:
        """Every rank's env state, for rank 0's next checkpoint: a collective, so only at points
        every rank reaches (the checkpoint interval, the end of the loop)."""
        self.env_states = gather_env_states(self.ctx, self.env)

    def _save_due(self, saved_at_s: float) -> bool:
        """Every `save_interval` iterations, or `save_interval_s` of training after the last
        checkpoint (the gathered `wall_s`, alike on every rank: all save after one iteration)."""
        runner, trained_s = self.cfg.runner, self.state.wall_s - saved_at_s
        return self.state.iteration % runner.save_interval == 0 or 0 < runner.save_interval_s <= trained_s

    def save(self) -> Path | None:
        """Rank 0 writes a checkpoint of the iteration just completed. Its own env state is
        taken now; the other ranks' is the last gathered (on a stop signal, a save may come
        between two gathers: their rows are then up to one checkpoint interval old)."""
        if not self.ctx.is_main:
            return None
        self.outputs.sync()
        path = checkpoint_path(self.run_dir, self.state.iteration)
        env_states = [self.env.resume_state(), *self.env_states[1:]]
        contents = checkpoint_contents(
            self.task_name, to_dict(self.cfg), self.state, self.env, self.algorithm, env_states
        )
        save_checkpoint(path, contents)
        if self.cfg.runner.save_bulk_state and hasattr(self.algorithm, "bulk_state"):
            save_bulk_state(path, self.algorithm.bulk_state())
        self.last_checkpoint = path
        return path


class SegmentClock:
    """Where an iteration's time goes, by the label of the segment it was spent in. On a GPU the
    host runs ahead of the device, so the segments are timed by CUDA events recorded between
    them and read once, at the end of the iteration; on the CPU work runs as it is queued, and
    the host's clock is read."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.marks: list[tuple[str, Any]] = []

    def mark(self, label: str) -> None:
        """From now on, time counts as `label` (until the next mark)."""
        if self.cuda:
            with torch.cuda.device(self.device):  # the run's GPU, whichever is current
                event = torch.cuda.Event(enable_timing=True)
                event.record(torch.cuda.current_stream(self.device))
            self.marks.append((label, event))
        else:
            self.marks.append((label, time.perf_counter()))

    def read(self) -> dict[str, float]:
        """Seconds by label, up to now (waits for the device to get there)."""
        self.mark("")
        if self.cuda:
            self.marks[-1][1].synchronize()
        seconds: dict[str, float] = collections.defaultdict(float)
        for (label, start), (_, end) in zip(self.marks, self.marks[1:], strict=False):
            seconds[label] += start.elapsed_time(end) / 1000.0 if self.cuda else end - start
        return seconds


def add_sums(total: dict[str, torch.Tensor], sums: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`total + sums` by name (a name only one has keeps its value), in new tensors: an update's
    sums may be a graph's outputs, which its next replay overwrites. Sums only: a figure that is
    not a sum over the update's steps would be multiplied by the number of updates."""
    added = {name: total[name] + value if name in total else value.clone() for name, value in sums.items()}
    return {**total, **added}


def parameters_sha256(policy: torch.nn.Module) -> str:
    """SHA-256 of the raw bytes of every parameter and buffer: equal exactly when bit-identical."""
    digest = hashlib.sha256()
    for tensor in policy.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


class ReplicaMismatch(RuntimeError):
    """The ranks' parameters differ: data-parallel training has lost lockstep."""
