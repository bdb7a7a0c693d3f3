"""Videos of a policy: joint positions recorded from the simulation, drawn and encoded to mp4 in
a separate process.

Drawing is MuJoCo's CPU-side OpenGL renderer on one world's state, so the recording itself costs
the simulation one row copy per step; a spawned process (at the lowest CPU priority during
training) turns the states into frames and an H.264 mp4 with PyAV. The process also chooses its
own `MUJOCO_GL`, which MuJoCo reads once, at import.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from mjrl.errors import cannot_write
from mjrl.files import atomic_target, make_dirs

if TYPE_CHECKING:  # importing MuJoCo here would fix its GL backend in the training process
    from mjrl.sim.scene import Scene

SIZE = (320, 240)
"""Frame width and height: small enough to draw at about 10 frames/s on one CPU core with Mesa."""


def frame_indices(num_states: int, state_fps: float, fps: float) -> list[int]:
    """Which recorded states (taken at `state_fps`) show at each frame of an `fps` video of the
    same duration: the nearest earlier state."""
    frames = max(1, round(num_states * fps / state_fps))
    return [min(num_states - 1, math.floor(k * state_fps / fps + 1e-9)) for k in range(frames)]


def write_mp4(frames: Iterable[np.ndarray], path: Path, fps: float) -> int:
    """Encode (H, W, 3) uint8 frames as H.264 in `path`, written under a temporary name and
    renamed, so a reader never sees half a file. Returns the number of frames."""
    import fractions

    import av

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc) from exc
    count = 0
    with atomic_target(path, suffix=".mp4") as tmp, av.open(str(tmp), mode="w") as container:
        stream = container.add_stream("libx264", rate=fractions.Fraction(fps).limit_denominator(1000))
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "23", "preset": "veryfast"}
        for frame in frames:
            if count == 0:
                stream.height, stream.width = frame.shape[:2]
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
            count += 1
        container.mux(stream.encode())
    return count


def write_gif(frames: list[np.ndarray], path: Path, fps: float) -> None:
    """A half-size animated GIF: what TensorBoard shows as a video (it plays no mp4)."""
    from PIL import Image

    images = [Image.fromarray(f[::2, ::2]) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)


def start_drawing_process(backend: str, idle: bool = False) -> None:
    """Initializer of the drawing process: its GL backend, set before MuJoCo is first imported
    there (unpickling a clip's `Scene` imports it), and with `idle` the lowest CPU priority."""
    os.environ["MUJOCO_GL"] = backend
    os.environ.pop("PYOPENGL_PLATFORM", None)
    if idle:
        lowest_priority()


def video_state(env: Any) -> torch.Tensor:
    """What a video records of each env per step: its qpos, followed by its ghost's
    (`TaskSpec.video_ghost`) when the task draws one."""
    ghost = env.task.video_ghost
    return env.sim.qpos if ghost is None else torch.cat([env.sim.qpos, ghost(env)], dim=1)


def render_clip(
    scene: Scene,
    qpos: np.ndarray,
    state_fps: float,
    fps: float,
    out: str,
    gif: bool = False,
    size: tuple[int, int] = SIZE,
    ghost: bool = False,
) -> int:
    """Entry point of the drawing process (`start_drawing_process` ran first): frames of the
    states `qpos` (T, nq; with `ghost`, the ghost's nq after the robot's), recorded at
    `state_fps`, into an mp4 at `fps` (and a GIF beside it with `gif`), `size` pixels wide and
    high. Returns the number of frames."""
    from mjrl.sim.render import FrameRenderer

    make_dirs(Path(out).parent)
    renderer = FrameRenderer(scene, *size, ghost=ghost)
    try:
        frames = [renderer.render(qpos[i]) for i in frame_indices(len(qpos), state_fps, fps)]
        if gif:
            write_gif(frames, Path(out).with_suffix(".gif"), fps)
        return write_mp4(frames, Path(out), fps)
    finally:
        renderer.close()


def render_in_subprocess(
    backend: str,
    scene: Scene,
    qpos: np.ndarray,
    state_fps: float,
    fps: float,
    out: Path,
    size: tuple[int, int] = SIZE,
    ghost: bool = False,
) -> int:
    """`render_clip` in a spawned process, waited for (what `play --video` does)."""
    with multiprocessing.get_context("spawn").Pool(1, initializer=start_drawing_process, initargs=(backend,)) as pool:
        return pool.apply(render_clip, (scene, qpos, state_fps, fps, str(out), False, size, ghost))


@torch.no_grad()
def record_states(env: Any, policy: Any, steps: int, until_episode_end: bool = False) -> np.ndarray:
    """`video_state` of env 0 at reset and after each of `steps - 1` steps of the deterministic
    policy: `steps` states, one per control period. Episodes that end are reset and go on; with
    `until_episode_end`, the states stop before env 0's first reset (fewer than `steps` then)."""
    from mjrl.tools.evaluate import reset_where_done

    obs = env.reset()
    reset_where_done(policy, torch.ones(env.num_envs, dtype=torch.bool, device=env.device))  # fresh episodes
    first = video_state(env)[0]
    states = torch.empty(steps, first.shape[0], device=env.device)
    states[0] = first
    for k in range(1, steps):
        obs, _, terminated, truncated, _ = env.step(policy.act_deterministic(obs["actor"]))
        reset_where_done(policy, terminated | truncated)
        if until_episode_end and bool(terminated[0] | truncated[0]):  # a host read: tools only
            return states[:k].cpu().numpy()
        states[k] = video_state(env)[0]
    return states.cpu().numpy()


def lowest_priority() -> None:
    """SCHED_IDLE where Linux has it: below nice 19, which still takes a share from a training
    process that is itself niced; else nice 19."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


class ClipRecorder:
    """Training videos: every `interval` iterations, the next `steps` states of env 0 of the
    training env are recorded (one device-side row copy per step, no host synchronisation) and
    handed to a spawned drawing process at the lowest priority. The runner asks for finished
    clips once per iteration and logs them."""

    def __init__(self, backend: str, env: Any, steps: int, folder: Path, gif: bool):
        self.scene, self.state_fps, self.folder, self.gif = env.task.scene, 1.0 / env.step_dt, folder, gif
        self.ghost = env.task.video_ghost is not None
        self.states = torch.empty(steps, video_state(env).shape[1], device=env.device)
        self.filled = -1  # -1: not recording
        self.iteration = 0
        # Lowest priority from the start (its imports included): on a machine whose cores the
        # training fills, the drawing process runs on idle time only.
        self.pool = multiprocessing.get_context("spawn").Pool(
            1, initializer=start_drawing_process, initargs=(backend, True)
        )
        self.pending: list[tuple[int, Path, Any]] = []

    @property
    def recording(self) -> bool:
        return self.filled >= 0

    def start(self, iteration: int) -> None:
        if not self.recording:
            self.filled, self.iteration = 0, iteration

    def record(self, env: Any) -> None:
        """Called after every env step while recording, with the training env."""
        self.states[self.filled].copy_(video_state(env)[0])
        self.filled += 1
        if self.filled == len(self.states):
            out = self.folder / f"iteration_{self.iteration:06d}.mp4"
            states = self.states.cpu().numpy()
            args = (self.scene, states, self.state_fps, self.state_fps, str(out), self.gif, SIZE, self.ghost)
            self.pending.append((self.iteration, out, self.pool.apply_async(render_clip, args)))
            self.filled = -1

    def finished(self) -> list[tuple[int, Path]]:
        """Clips written since the last call, as (iteration, path). A clip that failed is a
        warning, not the end of the training run."""
        done = [(it, out, result) for it, out, result in self.pending if result.ready()]
        self.pending = [p for p in self.pending if not p[2].ready()]
        written = []
        for iteration, out, result in done:
            try:
                result.get()
                written.append((iteration, out))
            except Exception as exc:  # whatever the drawing process raised
                print(f"warning: video of iteration {iteration} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return written

    def close(self, wait: bool = True) -> list[tuple[int, Path]]:
        """Stop taking clips; with `wait`, let the drawing process finish the pending ones first."""
        self.filled = -1
        if wait:
            for _, _, result in self.pending:
                result.wait()
        finished = self.finished() if wait else []
        self.pool.terminate()
        self.pool.join()
        return finished
