"""Where metrics go besides metrics.jsonl (`mjrl.metrics_file`): TensorBoard or WandB (on
request), the console."""

from __future__ import annotations

import math
import os
import socket
import sys
from pathlib import Path
from typing import Any


def _wandb_reachable(timeout: float = 2.0) -> bool:
    try:
        socket.create_connection(("api.wandb.ai", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


class Tracker:
    """TensorBoard or WandB, or nothing. Only rank 0 creates one."""

    def __init__(
        self, kind: str, run_dir: Path, config: dict, project: str, run_name: str, run_id: str, start_iteration: int = 0
    ):
        self.kind = kind
        self._tb = None
        self._wandb = None
        if kind == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            # A resume runs again the iterations logged after its checkpoint: purge_step hides
            # the old session's events from there on, instead of showing each step twice.
            self._tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=start_iteration or None)
        elif kind == "wandb":
            import wandb

            if not os.environ.get("WANDB_MODE") and not (os.environ.get("WANDB_API_KEY") and _wandb_reachable()):
                os.environ["WANDB_MODE"] = "offline"
            # The run id is stored in the run directory, so a resumed run continues the same
            # WandB run.
            self._wandb = wandb.init(
                project=project,
                name=run_name or run_dir.name,
                id=run_id,
                resume="allow",
                dir=str(run_dir),
                config=config,
            )
            # Charts are drawn against `iteration`, logged with every record, and WandB keeps
            # its own step counter. A resume from an earlier checkpoint logs iterations below
            # WandB's step again: with `step=iteration` WandB would drop them.
            self._wandb.define_metric("iteration")
            self._wandb.define_metric("*", step_metric="iteration")

    def log(self, metrics: dict[str, Any], step: int) -> None:
        scalars = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log({**scalars, "iteration": step})

    def log_video(self, tag: str, mp4: Path, step: int) -> None:
        """A clip written by mjrl.tools.video: the mp4 to WandB, its GIF twin to TensorBoard."""
        if self._tb is not None and mp4.with_suffix(".gif").is_file():
            from PIL import Image
            from tensorboard.compat.proto.summary_pb2 import Summary

            gif = mp4.with_suffix(".gif")
            width, height = Image.open(gif).size
            image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=gif.read_bytes())
            self._tb._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), step)
        if self._wandb is not None:
            import wandb

            self._wandb.log({tag: wandb.Video(str(mp4), format="mp4"), "iteration": step})

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s"


def console_line(m: dict[str, Any], max_iterations: int, eta_s: float) -> str:
    ret, length = m["mean_episode_return"], m["mean_episode_length"]
    ret_s = f"{ret:9.2f}" if math.isfinite(ret) else "        -"
    len_s = f"{length:6.0f}" if math.isfinite(length) else "     -"
    width = len(str(max_iterations))
    # The adaptive schedule moves the rate at every minibatch, rising from where the last update
    # left it while the policy is near the one that collected the rollout, falling as the KL
    # builds up over the epochs: the rate the update ended on is usually its lowest, so the
    # mean rate it used is the one shown (and the mean KL that steered it, where there is one).
    # An algorithm that logs neither (a registered one of a user's) shows neither.
    lr = m.get("mean_learning_rate", m.get("learning_rate"))
    lr_s = f" | lr {lr:.1e}" if lr is not None else ""
    kl = f" kl {m['mean_kl']:.4f}" if "mean_kl" in m else ""
    return (
        f"it {m['iteration'] + 1:>{width}}/{max_iterations} | return {ret_s} | len {len_s} | "
        f"{m['steps_per_second']:8,.0f} steps/s | coll {m['collection_s']:.2f}s learn {m['learning_s']:.2f}s"
        f"{lr_s}{kl} | ETA {_duration(eta_s)}"
    )


class _Tee:
    def __init__(self, file, stream):
        self.file, self.stream = file, stream

    def write(self, text: str) -> int:
        self.file.write(text)
        if self.stream is not None:
            self.stream.write(text)
        return len(text)

    def flush(self) -> None:
        self.file.flush()
        if self.stream is not None:
            self.stream.flush()

    def isatty(self) -> bool:
        return False


class RankLog:
    """Copies this process's stdout and stderr into its own log file. Ranks other than 0 keep
    stdout off the console (one rank prints progress); stderr always reaches it."""

    def __init__(self, path: Path, echo_stdout: bool):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a", buffering=1)
        self._saved = sys.stdout, sys.stderr
        sys.stdout = _Tee(self.file, sys.stdout if echo_stdout else None)
        sys.stderr = _Tee(self.file, sys.stderr)

    def note(self, text: str) -> None:
        """A line for the log file only."""
        self.file.write(text + "\n")

    def close(self) -> None:
        sys.stdout, sys.stderr = self._saved
        self.file.close()
