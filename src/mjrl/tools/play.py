"""`play`'s evaluation of a trained policy: its config, the checkpoint it reads, whole episodes
of the deterministic policy, or a video of one env.

Imports of torch and the simulator are made inside the functions: `play --help` and bad input
answer without them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from mjrl.errors import UsageError
from mjrl.files import prepare_output_file

if TYPE_CHECKING:
    from mjrl.envs import Task

EnvT = TypeVar("EnvT")  # the task's EnvConfig subclass (unbound: importing mjrl.envs here would slow `play --help`)


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
    exported: str = ""
    """Evaluate an exported model (`policy.pt2`, with its sidecar beside it) instead of a
    checkpoint: the deployed model as a robot runs it, in the env of the checkpoint it came from
    (the task's defaults when that checkpoint is not on this machine)."""
    video: str = ""
    """Write an mp4 of the first env here instead of evaluating (headless: EGL, else OSMesa)."""
    video_seconds: float = 10.0
    """Length of the video in simulated seconds; episodes that end are reset and go on."""
    video_fps: float = 0.0
    """Frames per second of the video; 0: one frame per control step (the task's control rate)."""
    video_size: tuple[int, int] = (320, 240)
    """Width and height of the video's frames (pixels). Mesa draws 320 x 240 at about 10 frames/s
    on one CPU core; the time grows with the pixels."""

    bounds: ClassVar[dict] = {
        "episodes": ">= 1",
        "num_envs": ">= 0",
        "seed": ">= 0",
        # The whole clip's states are recorded before it is drawn: an hour is 180,000 steps at 50 Hz.
        "video_seconds": "(0, 3600]",
        "video_fps": "[0, 240]",
        "video_size": "[16, 4096]",
    }
    """Ranges of the numeric fields (see `mjrl.config.check_numbers`)."""


def evaluate(task: Task, cfg: PlayConfig, path: Path | None = None, state: dict | None = None) -> dict:
    """Run `cfg.episodes` episodes of the checkpoint's deterministic policy; returns the figures."""
    import torch

    from mjrl.distributed.devices import resolve_device
    from mjrl.envs import VecEnv
    from mjrl.tools.evaluate import ZeroActions, run_episodes
    from mjrl.tools.trained import load_checkpoint_of, load_trained

    if state is None and not cfg.zero_actions and not cfg.exported:
        path, state = load_checkpoint_of(task, cfg.checkpoint, cfg.run_dir)
    device = resolve_device(cfg.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    env_cfg = cfg.env.for_evaluation(cfg.num_envs or cfg.episodes, cfg.obs_noise)
    if cfg.zero_actions:
        env = VecEnv(env_cfg, task.build(env_cfg), device, seed=cfg.seed)
        policy, source = ZeroActions(env.num_actions), {"checkpoint": None, "iteration": 0}
    elif cfg.exported:
        from mjrl.tools.export import ExportedPolicy

        policy = ExportedPolicy(Path(cfg.exported), device)
        env = VecEnv(env_cfg, task.build(env_cfg), device, seed=cfg.seed)
        if env.obs_dims["actor"] != policy.sidecar.observation_size:
            raise UsageError(
                f"--exported {cfg.exported}: it reads {policy.sidecar.observation_size} observations, this env gives "
                f"{env.obs_dims['actor']}: evaluate it in the env it was trained in"
            )
        source = {"exported": cfg.exported, "iteration": policy.sidecar.iteration}
    else:
        env, policy = load_trained(task, state, path, env_cfg, device, cfg.seed)
        source = {"checkpoint": str(path), "iteration": state["iteration"]}
    episodes = run_episodes(env, policy, cfg.episodes, task.play_metrics)
    return {"task": task.name, **source, **episodes.summary()}


def record_video(task: Task, cfg: PlayConfig, path: Path, state: dict) -> dict:
    """`--video`: `video_seconds` of the first env under the deterministic policy, as an mp4."""
    import torch

    from mjrl.distributed.devices import resolve_device
    from mjrl.sim.render import pick_gl_backend
    from mjrl.tools.trained import load_trained
    from mjrl.tools.video import record_states, render_in_subprocess

    out = Path(cfg.video)
    if out.suffix.lower() != ".mp4":
        raise UsageError(f"--video {out}: the file name must end in .mp4")
    if cfg.video_seconds <= 0 or cfg.video_fps < 0:
        raise UsageError("--video-seconds must be positive and --video-fps at least 0")
    if any(side % 2 for side in cfg.video_size):
        width, height = cfg.video_size
        raise UsageError(f"--video-size {width} {height}: H.264 takes even sizes only; give even numbers")
    prepare_output_file(out)
    backend = pick_gl_backend()  # before the slow part: a machine that cannot draw says so at once
    device = resolve_device(cfg.device)
    if device.type == "cpu":
        torch.set_num_threads(1)
    env_cfg = cfg.env.for_evaluation(cfg.num_envs or 1, cfg.obs_noise)
    env, policy = load_trained(task, state, path, env_cfg, device, cfg.seed)
    control_fps = 1.0 / env.step_dt
    states = record_states(env, policy, max(1, round(cfg.video_seconds * control_fps)))
    fps = cfg.video_fps or control_fps
    ghost = env.task.video_ghost is not None
    frames = render_in_subprocess(backend, env.task.scene, states, control_fps, fps, out, cfg.video_size, ghost)
    return {"task": task.name, "checkpoint": str(path), "video": str(out), "frames": frames, "fps": fps, "gl": backend}
