"""`play TASK --checkpoint PATH | --run-dir DIR | --zero-actions True [--episodes K] [--video PATH.mp4] [--env.* ...]`.

Runs the deterministic policy (the Gaussian's mean) for K whole episodes on clean observations
and prints the mean return, the early-termination rate and the task's own figures, ending with
one JSON line. `--env.*` flags change the env the checkpoint was trained on, for this evaluation.
`--zero-actions True` evaluates the zero-action baseline instead of a checkpoint. With `--video`,
it records the first env instead and writes an mp4, drawn headless.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from mjrl.cli.common import parse_flags, peek_option, pop_task, run_command
from mjrl.errors import UsageError

EnvT = TypeVar("EnvT")  # the task's EnvConfig subclass (unbound: importing mjrl.envs here would slow `--help`)


@dataclasses.dataclass(frozen=True)
class PlayConfig(Generic[EnvT]):
    """Evaluate a trained policy."""

    env: EnvT
    """The env, as the checkpoint was trained; `--env.*` flags change it for this evaluation
    (fixed command ranges, for instance). `num_envs`, `obs_noise` and the random initial
    episode length are set by the flags below."""
    checkpoint: str = ""
    """Checkpoint file to evaluate."""
    run_dir: str = ""
    """Run directory; its newest readable checkpoint is evaluated."""
    episodes: int = 16
    """Episodes to run (each env runs whole episodes from a fresh reset)."""
    num_envs: int = 0
    """Parallel envs; 0 means one env per episode."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N."""
    seed: int = 0
    """Seed of the reset distribution."""
    obs_noise: bool = False
    """Keep the actor's observation noise (off: evaluate on clean observations)."""
    zero_actions: bool = False
    """Evaluate the zero-action baseline (the action offset held: a legged robot stands in its
    home pose) on the task's default env instead of a checkpoint."""
    video: str = ""
    """Write an mp4 of the first env here instead of evaluating (headless: EGL, else OSMesa)."""
    video_seconds: float = 10.0
    """Length of the video in simulated seconds; episodes that end are reset and go on."""
    video_fps: float = 0.0
    """Frames per second of the video; 0: one frame per control step (the task's control rate)."""

    bounds: ClassVar[dict] = {
        "episodes": ">= 1",
        "num_envs": ">= 0",
        "seed": ">= 0",
        "video_seconds": "> 0",
        "video_fps": ">= 0",
    }
    """Ranges of the numeric fields (see `mjrl.runner.config.check_numbers`)."""


def _play(argv: list[str]) -> int:
    args = list(argv)
    usage = (
        "usage: play TASK --checkpoint PATH | --run-dir DIR | --zero-actions True [--episodes K] "
        "[--num-envs N] [--video PATH.mp4] [--env.* ...]"
    )
    task = pop_task(args, usage)
    if task is None:
        return 0 if args else 2
    task_name = task.name
    # The checkpoint's own env config is the default that `--env.*` flags change, so it is
    # read before the flags are parsed.
    path, state = None, None
    zero_actions = peek_option(args, "--zero-actions") in ("True", "true")
    checkpoint, run_dir = peek_option(args, "--checkpoint"), peek_option(args, "--run-dir")
    if zero_actions and (checkpoint or run_dir):
        raise UsageError("--zero-actions True evaluates no checkpoint: drop --checkpoint and --run-dir")
    if not zero_actions and not {"-h", "--help"} & set(args):
        path, state = _load(task, checkpoint, run_dir)
    env_cfg = trained_env_config(task, state)
    prog, description = f"play {task_name}", f"Evaluate a {task_name} policy."
    cfg = parse_flags(PlayConfig[type(task.env_cfg)], PlayConfig(env=env_cfg), args, prog, description)
    from mjrl.runner.config import check_numbers

    check_numbers(cfg)
    if cfg.video:
        if cfg.zero_actions:
            raise UsageError("--video records a checkpoint's policy: drop --zero-actions")
        result = record_video(task, cfg, path, state)
        print(f"wrote {result['video']} ({result['frames']} frames at {result['fps']:g} fps, MUJOCO_GL={result['gl']})")
        print(json.dumps(result))
        return 0
    result = evaluate(task, cfg, path, state)
    extra = "".join(f" | {k} {v:.3f}" for k, v in result.items() if k.startswith("mean_") and "return" not in k)
    print(
        f"{task_name}: {result['episodes']} episodes | mean return {result['mean_return']:.2f} | "
        f"early terminations {result['early_termination_rate']:.1%}{extra}"
    )
    print(json.dumps(result))
    return 0


def _load(task, checkpoint: str | None, run_dir: str | None) -> tuple[Path, dict]:
    from mjrl.runner.checkpoint import load_checkpoint, load_newest_checkpoint
    from mjrl.runner.start import check_task

    if bool(checkpoint) == bool(run_dir):
        raise UsageError("give exactly one of --checkpoint PATH or --run-dir DIR")
    if run_dir:
        if not Path(run_dir).is_dir():
            raise UsageError(f"--run-dir {run_dir}: no such run directory")
        path, state = load_newest_checkpoint(Path(run_dir))
    else:
        path = Path(checkpoint)
        state = load_checkpoint(path)
    check_task(state, task.name, path)
    return path, state


def trained_env_config(task, state: dict | None):
    """The env config a checkpoint was trained with (the task's defaults without a checkpoint)."""
    from mjrl.runner.config import apply_dict

    if state is None:
        return task.env_cfg
    return apply_dict(task.env_cfg, state["config"]["env"], "env.")


def evaluate(task, cfg: PlayConfig, path: Path | None = None, state: dict | None = None) -> dict:
    """Run `cfg.episodes` episodes of the checkpoint's deterministic policy; returns the figures."""
    import torch

    from mjrl.distributed.context import resolve_device
    from mjrl.envs import VecEnv
    from mjrl.runner.evaluate import ZeroActions, load_trained, run_episodes

    if state is None and not cfg.zero_actions:
        path, state = _load(task, cfg.checkpoint, cfg.run_dir)
    device = resolve_device(cfg.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    env_cfg = dataclasses.replace(
        cfg.env, num_envs=cfg.num_envs or cfg.episodes, obs_noise=cfg.obs_noise, random_initial_episode_length=False
    )
    if cfg.zero_actions:
        env = VecEnv(env_cfg, task.build(env_cfg), device, seed=cfg.seed)
        policy, source = ZeroActions(env.num_actions), {"checkpoint": None, "iteration": 0}
    else:
        env, policy = load_trained(task, state, path, env_cfg, device, cfg.seed)
        source = {"checkpoint": str(path), "iteration": state["iteration"]}
    episodes = run_episodes(env, policy, cfg.episodes, task.play_metrics)
    return {"task": task.name, **source, **episodes.summary()}


def record_video(task, cfg: PlayConfig, path: Path, state: dict) -> dict:
    """`--video`: `video_seconds` of the first env under the deterministic policy, as an mp4."""
    import torch

    from mjrl.distributed.context import resolve_device
    from mjrl.runner.evaluate import load_trained
    from mjrl.runner.video import record_states, render_in_subprocess
    from mjrl.sim.render import pick_gl_backend

    out = Path(cfg.video)
    if out.suffix.lower() != ".mp4":
        raise UsageError(f"--video {out}: the file name must end in .mp4")
    if cfg.video_seconds <= 0 or cfg.video_fps < 0:
        raise UsageError("--video-seconds must be positive and --video-fps at least 0")
    backend = pick_gl_backend()  # before the slow part: a machine that cannot draw says so at once
    device = resolve_device(cfg.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    env_cfg = dataclasses.replace(
        cfg.env, num_envs=cfg.num_envs or 1, obs_noise=cfg.obs_noise, random_initial_episode_length=False
    )
    env, policy = load_trained(task, state, path, env_cfg, device, cfg.seed)
    control_fps = 1.0 / env.step_dt
    states = record_states(env, policy, max(1, round(cfg.video_seconds * control_fps)))
    fps = cfg.video_fps or control_fps
    frames = render_in_subprocess(backend, env.task.model_xml, states, control_fps, fps, out)
    return {"task": task.name, "checkpoint": str(path), "video": str(out), "frames": frames, "fps": fps, "gl": backend}


def main(argv: list[str] | None = None) -> int:
    return run_command("play", _play, argv)


if __name__ == "__main__":
    sys.exit(main())
