"""`mjrl export TASK --run-dir DIR | --checkpoint PATH [--format onnx|pt2|aoti|torchscript] [--out PATH]`.

Writes the deterministic actor, with the observation normaliser folded in, for a runtime that
has neither Python nor mjrl, and a JSON sidecar beside it (`<model>.json`).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Literal

from mjrl.cli.common import parse_flags, pop_task, run_command
from mjrl.errors import UsageError


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Export a trained policy for deployment."""

    checkpoint: str = ""
    """Checkpoint file to export."""
    run_dir: str = ""
    """Run directory; its newest readable checkpoint is exported."""
    format: Literal["onnx", "pt2", "aoti", "torchscript"] = "onnx"
    """onnx (onnxruntime, TensorRT, ...), pt2 (torch.export: `torch.export.load`), aoti (pt2
    compiled by AOTInductor for this machine's CPU kind: C++ through libtorch's
    AOTIModelPackageLoader, or Python) or torchscript (libtorch; deprecated by torch, pt2 is its
    successor)."""
    out: str = ""
    """Model file to write (default: <run-dir>/exported/policy.onnx, policy.pt2, policy.aoti.pt2 or
    policy.pt);
    the sidecar is the same path plus .json."""
    scaled_actions: bool = False
    """Fold the env's action transform into the model, so it outputs actuator targets
    (offset + scale * clip(action)) instead of the raw policy mean."""


def _export(argv: list[str]) -> int:
    args = list(argv)
    usage = (
        "usage: mjrl export TASK --run-dir DIR | --checkpoint PATH [--format onnx|pt2|aoti|torchscript] [--out PATH]"
    )
    task = pop_task(args, usage)
    if task is None:
        return 0 if args else 2
    cfg = parse_flags(ExportConfig, ExportConfig(), args, "mjrl export", ExportConfig.__doc__ or "")
    model, sidecar = export(task, cfg)
    print(f"wrote {model} and {sidecar.name}")
    return 0


def export(task, cfg: ExportConfig) -> tuple[Path, Path]:
    """Load the checkpoint, build one env on the CPU for the observation layout, export."""
    import torch

    from mjrl.files import prepare_output_file, refuse_folder
    from mjrl.tools.export import SUFFIXES, check_aoti_compiler, default_output, export_policy
    from mjrl.tools.trained import load_checkpoint_of, load_trained, trained_env_config

    path, state = load_checkpoint_of(task, cfg.checkpoint, cfg.run_dir)
    run_dir = Path(cfg.run_dir) if cfg.run_dir else _run_dir_of(path)
    out = Path(cfg.out) if cfg.out else default_output(run_dir, cfg.format)
    refuse_folder(out)  # before its name's suffix is judged
    suffixes = SUFFIXES[cfg.format]
    if out.suffix not in suffixes:
        raise UsageError(f"--out {out}: a {cfg.format} model's file name must end in {' or '.join(suffixes)}")
    if cfg.format == "aoti":
        check_aoti_compiler()
    prepare_output_file(out)
    env_cfg = trained_env_config(task, state).for_evaluation(1)
    env, policy = load_trained(task, state, path, env_cfg, torch.device("cpu"))
    source = {
        "task": task.name,
        "run_dir": run_dir,
        "checkpoint": path,
        "iteration": state["iteration"],
        "env_steps": state.get("env_steps", 0),
    }
    return export_policy(env, policy, cfg.format, out, source, cfg.scaled_actions)


def _run_dir_of(checkpoint: Path) -> Path:
    """RUN/checkpoints/model_N.pt -> RUN; a checkpoint elsewhere counts as its own folder."""
    return checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else checkpoint.parent


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl export", _export, argv)


if __name__ == "__main__":
    sys.exit(main())
