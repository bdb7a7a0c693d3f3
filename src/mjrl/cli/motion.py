"""`mjrl motion convert | record | info`: make and inspect reference motions (`mjrl.motion`).

mjrl motion convert FILE.csv --robot humanoid --fps 30 --out FILE.npz [--quat-order wxyz]
mjrl motion record TASK --run-dir RUN --out FILE.npz [--seconds S] [--env.* ...]
mjrl motion info FILE.npz
mjrl motion make [--out DIR] [--motions squat walk] [--run-dir RUN]
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Generic, Literal, TypeVar

from mjrl.cli.common import parse_flags, peek_option, pop_task, run_command
from mjrl.errors import UsageError

USAGE = """usage: mjrl motion {convert,record,info,make} ...
  convert  a CSV of root poses and joint angles to a motion file (see `mjrl motion convert --help`)
  record   a trained policy's play as a motion file (see `mjrl motion record --help`)
  info     what a motion file holds
  make     make again the motions mjrl ships (see `mjrl motion make --help`)"""

EnvT = TypeVar("EnvT")


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """Convert retargeted mocap (one CSV row per frame: root x y z, root quaternion, joint angles)
    to a motion file: bodies by MuJoCo's forward kinematics, velocities by finite differences,
    resampled to the control rate."""

    csv: str = ""
    """The CSV file (a first row of column names is skipped); also the first argument."""
    out: str = ""
    """The motion file to write (.npz)."""
    robot: str = "humanoid"
    """One of mjrl's robots by name (humanoid, go1, mule) or the path of an MJCF file."""
    fps: float = 30.0
    """Frames per second of the CSV."""
    out_fps: float = 50.0
    """Frames per second of the motion file: the control rate of the task that tracks it (50 for
    mjrl's humanoid: 0.005 s x 4)."""
    quat_order: Literal["xyzw", "wxyz"] = "xyzw"
    """Order of the root quaternion's columns."""
    joints: tuple[str, ...] = ()
    """The CSV's joint columns by name, in order, when they are not every joint of the robot in
    the MJCF's order; the robot's other joints stay at the home pose."""


@dataclasses.dataclass(frozen=True)
class RecordConfig(Generic[EnvT]):
    """Record a trained policy's play as a motion file: the first env from a reset, deterministic
    actions, on clean observations."""

    env: EnvT
    """The env, as the checkpoint was trained; `--env.*` flags change it (fixed commands, for a
    clean walk: `--env.commands.lin-vel-x 0.5 0.5 --env.commands.lin-vel-y 0 0
    --env.commands.yaw-rate 0 0`)."""
    out: str = ""
    """The motion file to write (.npz)."""
    checkpoint: str = ""
    """Checkpoint file to record."""
    run_dir: str = ""
    """Run directory; its newest readable checkpoint is recorded."""
    seconds: float = 10.0
    """Length of the motion (simulated seconds)."""
    seed: int = 0
    """Seed of the reset."""


@dataclasses.dataclass(frozen=True)
class MakeConfig:
    """Make again the reference motions mjrl ships (`tasks/motions/`, `mjrl.tools.shipped_motions`):
    the squat-reach from its keyframes (inverse kinematics: feet planted, balance kept), the walk
    recorded from the kept humanoid run."""

    out: str = "tasks/motions"
    """The folder to write humanoid_squat_reach.npz and humanoid_walk.npz into."""
    motions: tuple[Literal["squat", "walk"], ...] = ("squat", "walk")
    """Which motions to make."""
    run_dir: str = "runs/humanoid-h"
    """The humanoid run the walk is recorded from (the kept one, in a checkout of mjrl)."""


def _output(out: str) -> Path:
    from mjrl.files import prepare_output_file

    if not out:
        raise UsageError("give the motion file to write with --out FILE.npz")
    path = Path(out)
    if path.suffix != ".npz":
        raise UsageError(f"--out {out}: a motion file's name ends in .npz")
    prepare_output_file(path)
    return path


def _convert(args: list[str]) -> int:
    positional = [a for a in args[:1] if not a.startswith("-")]
    argv = ["--csv", *positional, *args[1:]] if positional else args
    cfg = parse_flags(ConvertConfig, ConvertConfig(), argv, "mjrl motion convert", ConvertConfig.__doc__ or "")
    if not cfg.csv:
        raise UsageError("give the CSV to convert: mjrl motion convert FILE.csv --robot ROBOT --fps FPS --out FILE.npz")
    out = _output(cfg.out)
    from mjrl.motion import RobotKinematics, save_motion
    from mjrl.motion.convert import csv_to_motion

    kinematics = RobotKinematics(cfg.robot)
    motion = csv_to_motion(Path(cfg.csv), kinematics, cfg.fps, cfg.out_fps, cfg.quat_order, cfg.joints)
    save_motion(motion, out)
    print(
        f"wrote {out}: {motion.num_frames} frames at {motion.fps:g} fps ({motion.duration_s:.2f} s) of {motion.robot}"
    )
    return 0


def _record(args: list[str]) -> int:
    usage = (
        "usage: mjrl motion record TASK --run-dir DIR | --checkpoint PATH --out FILE.npz [--seconds S] [--env.* ...]"
    )
    task = pop_task(args, usage)
    if task is None:
        return 0 if args else 2
    from mjrl.tools.trained import load_checkpoint_of, trained_env_config

    path = state = None
    if not {"-h", "--help"} & set(args):
        path, state = load_checkpoint_of(task, peek_option(args, "--checkpoint"), peek_option(args, "--run-dir"))
    prog = f"mjrl motion record {task.name}"
    default = RecordConfig(env=trained_env_config(task, state))
    cfg = parse_flags(RecordConfig[type(task.env_cfg)], default, args, prog, RecordConfig.__doc__ or "")
    from mjrl.config import check_numbers

    check_numbers(cfg)  # the env's flags as play and train check them
    if not 0 < cfg.seconds <= 3600:
        raise UsageError(f"--seconds {cfg.seconds:g}: give a length in (0, 3600]")
    out = _output(cfg.out)
    import torch

    from mjrl.motion import save_motion
    from mjrl.tools.motion import record_motion
    from mjrl.tools.trained import load_trained

    torch.set_num_threads(1)
    env, policy = load_trained(task, state, path, cfg.env.for_evaluation(1), torch.device("cpu"), cfg.seed)
    motion = record_motion(env, policy, cfg.seconds)
    save_motion(motion, out)
    print(f"wrote {out}: {motion.num_frames} frames at {motion.fps:g} fps of {path}")
    return 0


def _info(args: list[str]) -> int:
    if args in (["-h"], ["--help"]):
        print("usage: mjrl motion info FILE.npz")
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        raise UsageError("give one motion file: mjrl motion info FILE.npz")
    from mjrl.motion import load_motion
    from mjrl.tools.motion import describe_motion

    print(describe_motion(load_motion(args[0]), Path(args[0])))
    return 0


SHIPPED = {"squat": "humanoid_squat_reach.npz", "walk": "humanoid_walk.npz"}


def _make(args: list[str]) -> int:
    cfg = parse_flags(MakeConfig, MakeConfig(), args, "mjrl motion make", MakeConfig.__doc__ or "")
    folder = Path(cfg.out)
    paths = {name: folder / file for name, file in SHIPPED.items() if name in cfg.motions}
    for path in paths.values():
        _output(str(path))  # writable, before the work
    if "walk" in paths and not Path(cfg.run_dir).is_dir():
        raise UsageError(f"--run-dir {cfg.run_dir}: no such run; the walk is recorded from a humanoid run")
    if "squat" in paths:
        from mjrl.motion import save_motion
        from mjrl.tools.shipped_motions import squat_motion

        motion, checks = squat_motion()
        save_motion(motion, paths["squat"])
        print(
            f"wrote {paths['squat']}: {motion.num_frames} frames, "
            + ", ".join(f"{k} {v:.4f}" for k, v in checks.items())
        )
    if "walk" in paths:
        from mjrl.tools.shipped_motions import WALK

        return _record([*WALK, "--run-dir", cfg.run_dir, "--out", str(paths["walk"])])
    return 0


def _motion(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    commands = {"convert": _convert, "record": _record, "info": _info, "make": _make}
    if argv[0] not in commands:
        raise UsageError(f"unknown command {argv[0]!r}; expected convert, record, info or make")
    return commands[argv[0]](list(argv[1:]))


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl motion", _motion, argv)


if __name__ == "__main__":
    sys.exit(main())
