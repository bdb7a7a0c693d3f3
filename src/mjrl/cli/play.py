"""`play TASK --checkpoint PATH | --run-dir DIR | --exported MODEL.pt2 | --zero-actions True [--episodes K]
[--video PATH.mp4] [--env.* ...]`.

Runs the deterministic policy (the Gaussian's mean) for K whole episodes on clean observations
and prints the mean return, the early-termination rate and the task's own figures, ending with
one JSON line. `--env.*` flags change the env the checkpoint was trained on, for this evaluation.
`--zero-actions True` evaluates the zero-action baseline instead of a checkpoint, `--exported`
an exported pt2 model (as a robot runs it). With `--video`,
it records the first env instead and writes an mp4, drawn headless.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mjrl.cli.common import parse_flags, peek_option, pop_task, run_command
from mjrl.errors import UsageError
from mjrl.tools.play import PlayConfig, evaluate, record_video
from mjrl.tools.trained import load_checkpoint_of, trained_env_config


def _play(argv: list[str]) -> int:
    args = list(argv)
    usage = (
        "usage: play TASK --checkpoint PATH | --run-dir DIR | --exported MODEL.pt2 | --zero-actions True "
        "[--episodes K] [--num-envs N] [--video PATH.mp4] [--env.* ...]"
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
    exported = peek_option(args, "--exported")
    if zero_actions and (checkpoint or run_dir or exported):
        raise UsageError("--zero-actions True evaluates no policy: drop --checkpoint, --run-dir and --exported")
    if exported and (checkpoint or run_dir):
        raise UsageError("--exported evaluates an exported model: drop --checkpoint and --run-dir")
    if exported:
        state = _state_behind(task, Path(exported))
    elif not zero_actions and not {"-h", "--help"} & set(args):
        path, state = load_checkpoint_of(task, checkpoint, run_dir)
    env_cfg = trained_env_config(task, state)
    prog, description = f"play {task_name}", f"Evaluate a {task_name} policy."
    cfg = parse_flags(PlayConfig[type(task.env_cfg)], PlayConfig(env=env_cfg), args, prog, description)
    from mjrl.config import check_numbers

    check_numbers(cfg)
    if cfg.video:
        if cfg.zero_actions or cfg.exported:
            raise UsageError("--video records a checkpoint's policy: drop --zero-actions and --exported")
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


def _state_behind(task, model: Path) -> dict | None:
    """The checkpoint an exported model came from (its sidecar names it), for the env it was
    trained in; None (the task's defaults) when that checkpoint is not on this machine."""
    from mjrl.checkpoint import check_task, load_checkpoint
    from mjrl.tools.export import read_sidecar

    sidecar = read_sidecar(model)
    if sidecar.task != task.name:
        raise UsageError(f"--exported {model}: exported from {sidecar.task}, not {task.name}")
    source = Path(sidecar.checkpoint)
    if not source.is_file():
        print(f"note: {source}, which {model.name} came from, is not here: the task's default env")
        return None
    state = load_checkpoint(source)
    check_task(state, task.name, source)
    return state


def main(argv: list[str] | None = None) -> int:
    return run_command("play", _play, argv)


if __name__ == "__main__":
    sys.exit(main())
