"""`mjrl list | train ... | play ... | plot ... | export ...`: one entry point for everything."""

from __future__ import annotations

import sys

USAGE = """usage: mjrl {list,train,play,plot,export,slurm,motion,kernels,buffers} ...
  list    tasks and presets
  train   train a policy (see `train --help`)
  play    evaluate a checkpoint or record a video (see `play --help`)
  plot    draw learning curves of runs (see `mjrl plot --help`)
  export  write a policy as ONNX or TorchScript for deployment (see `mjrl export --help`)
  slurm   write or submit a Slurm batch script that trains across nodes (see `mjrl slurm --help`)
  motion  make and inspect reference motions for tracking (see `mjrl motion --help`)
  kernels count the kernels a step and an update launch (see `mjrl kernels --help`)
  buffers measure the contact and constraint buffers a task needs (see `mjrl buffers TASK --help`)"""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "list":
        from mjrl.cli.common import preset_names
        from mjrl.tasks import describe_tasks

        print("tasks:\n" + describe_tasks())
        print("presets: " + ", ".join(preset_names()))
        return 0
    if command == "train":
        from mjrl.cli.train import main as train_main

        return train_main(rest)
    if command == "play":
        from mjrl.cli.play import main as play_main

        return play_main(rest)
    if command == "plot":
        from mjrl.cli.plot import main as plot_main

        return plot_main(rest)
    if command == "export":
        from mjrl.cli.export import main as export_main

        return export_main(rest)
    if command == "slurm":
        from mjrl.cli.slurm import main as slurm_main

        return slurm_main(rest)
    if command == "motion":
        from mjrl.cli.motion import main as motion_main

        return motion_main(rest)
    if command == "kernels":
        from mjrl.cli.kernels import main as kernels_main

        return kernels_main(rest)
    if command == "buffers":
        from mjrl.cli.buffers import main as buffers_main

        return buffers_main(rest)
    print(
        f"mjrl: error: unknown command {command!r}; expected list, train, play, plot, export, slurm, motion, kernels "
        "or buffers",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
