"""`mjrl slurm TASK --nodes N --gpus-per-node G [--time ...] [--seeds 1-8] [train flags]`.

Writes the Slurm batch script that trains TASK across N nodes (`mjrl.distributed.slurm` says
what it settles): printed, written with `--out FILE`, or submitted with `--submit True`. Every
flag that is not one of this command's goes to `train`, and is checked now rather than on the
cluster.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from mjrl.cli.common import parse_flags, pop_task, run_command
from mjrl.errors import UsageError
from mjrl.plugins import read_plugins

USAGE = "usage: mjrl slurm TASK --nodes N --gpus-per-node G [--time LIMIT] [--seeds 1-8] [--submit True] [train flags]"

# Set by the batch script itself: a user's value would contradict it.
SET_BY_SCRIPT = {
    "--nproc-per-node": "--gpus-per-node or --ranks-per-node",
    "--nnodes": "--nodes",
    "--rdzv-endpoint": "the job's first node and a port from its id",
    "--rdzv-id": "the job id",
    "--node-rank": "the c10d rendezvous",
    "--max-restarts": "--max-restarts of mjrl slurm",
    "--distributed": "mjrl's launcher on each node",
    "--device": "--gpus-per-node (0: cpu)",
}


@dataclasses.dataclass(frozen=True)
class SlurmConfig:
    """Write a Slurm batch script that trains a task across nodes (one Slurm task per node runs
    mjrl's launcher, which starts the node's ranks); print it, write it, or submit it."""

    nodes: int = 1
    """Nodes of the job."""
    gpus_per_node: int = 1
    """GPUs per node, one rank each (--device cuda); 0: a CPU job (gloo, --device cpu)."""
    ranks_per_node: int = 0
    """Ranks per node; 0: one per GPU, or 1 in a CPU job."""
    cpus_per_task: int = 0
    """CPU cores for each node's ranks (Slurm's --cpus-per-task); 0: the partition's default."""
    time: str = ""
    """Time limit (MINUTES, HH:MM:SS, DAYS-HH:MM:SS, or UNLIMITED); empty: the partition's. With
    a limit, Slurm warns the job `warn_s` seconds before it, and the job checkpoints and requeues
    itself, so a long training runs as a chain of jobs."""
    warn_s: int = 120
    """Seconds before the time limit at which the job checkpoints and requeues itself (Slurm
    may signal up to a minute early)."""
    partition: str = ""
    """Slurm partition; empty: the cluster's default."""
    account: str = ""
    """Slurm account to charge; empty: the user's default."""
    job_name: str = ""
    """Slurm job name; empty: the task's name."""
    seeds: str = ""
    """One training per seed, as a job array: 1-8, 1,3,5 or 0-30:10 (each array task trains
    with --seed its index and --run-name seed-<index>). Empty: one training, --seed as given."""
    log_dir: str = "slurm-logs"
    """Folder of the jobs' log files (<job name>-<job id>.out), relative to where the job is
    submitted; a requeued job appends to its file."""
    max_restarts: int = 3
    """Restarts of a node's ranks after a failure within the job (the elastic agent's)."""
    out: str = ""
    """Write the script to this file instead of printing it."""
    submit: bool = False
    """Submit the script with sbatch (and write it into --log-dir)."""

    bounds: ClassVar[dict] = {
        "nodes": ">= 1",
        "gpus_per_node": ">= 0",
        "ranks_per_node": ">= 0",
        "cpus_per_task": ">= 0",
        "warn_s": ">= 1",
        "max_restarts": ">= 0",
    }


def split_args(args: list[str]) -> tuple[list[str], list[str]]:
    """(this command's flags, train's flags)."""
    own = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(SlurmConfig)}
    mine, train = [], []
    i = 0
    while i < len(args):
        name = args[i].split("=", 1)[0]
        if name in own:
            take = 1 if "=" in args[i] else 2
            mine += args[i : i + take]
            i += take
        else:
            train.append(args[i])
            i += 1
    return mine, train


def check_train_args(task_name: str, train_args: list[str], seeds: bool) -> None:
    """The flags the script passes to train: none it sets itself, and all of them valid."""
    from mjrl.cli.train import parse_train_args
    from mjrl.runner.config import validate

    reserved = dict(SET_BY_SCRIPT)
    if seeds:
        reserved |= {"--seed": "--seeds", "--run-name": "--seeds"}
    for arg in train_args:
        name = arg.split("=", 1)[0]
        if name in reserved:
            raise UsageError(f"{name} is set by the batch script from {reserved[name]}; drop it")
    task, cfg = parse_train_args([task_name, *train_args])
    validate(cfg)
    # What the task checks as it assembles its terms (its MJCF, a tracking task's motion files),
    # here rather than on the cluster after the job has queued; nothing is simulated.
    task.build(cfg.env)


def batch_job(task_name: str, cfg: SlurmConfig, train_args: list[str]):
    from mjrl.config import check_numbers
    from mjrl.distributed.slurm import BatchJob, check_directive_value, seed_indices, time_limit_seconds

    check_numbers(cfg)
    if cfg.gpus_per_node and cfg.ranks_per_node > cfg.gpus_per_node:
        raise UsageError(
            f"--ranks-per-node {cfg.ranks_per_node} is more than --gpus-per-node {cfg.gpus_per_node}: a GPU takes one "
            "rank; give at most as many ranks as GPUs"
        )
    for flag, value in (("--job-name", cfg.job_name), ("--partition", cfg.partition), ("--account", cfg.account),
                        ("--log-dir", cfg.log_dir)):  # fmt: skip
        check_directive_value(flag, value)
    if cfg.time and time_limit_seconds(cfg.time) <= cfg.warn_s:
        raise UsageError(f"--time {cfg.time} is not longer than --warn-s {cfg.warn_s}: give a longer limit")
    if cfg.seeds:
        seed_indices(cfg.seeds)
    check_train_args(task_name, train_args, bool(cfg.seeds))
    train = Path(sys.executable).with_name("train")
    return BatchJob(
        task=task_name,
        train_args=tuple(train_args),
        train_command=str(train) if train.is_file() else "train",
        nodes=cfg.nodes,
        gpus_per_node=cfg.gpus_per_node,
        ranks_per_node=cfg.ranks_per_node or max(cfg.gpus_per_node, 1),
        cpus_per_task=cfg.cpus_per_task,
        time=cfg.time,
        warn_s=cfg.warn_s,
        partition=cfg.partition,
        account=cfg.account,
        job_name=cfg.job_name or task_name,
        seeds=cfg.seeds,
        log_dir=cfg.log_dir,
        max_restarts=cfg.max_restarts,
    )


def submit(script: str, cfg: SlurmConfig, job_name: str) -> str:
    """Submit with sbatch; returns the job id. The log folder is made first: Slurm does not
    make it, and a job whose log it cannot open fails without a word."""
    from mjrl.files import make_dirs, write_text

    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise UsageError("sbatch not found: submit from a Slurm login node, or write the script with --out FILE")
    log_dir = Path(cfg.log_dir)
    made = not log_dir.exists()
    make_dirs(log_dir)
    done = subprocess.run([sbatch, "--parsable"], input=script, capture_output=True, text=True)
    if done.returncode != 0:
        if made:  # nothing half-made is left behind
            shutil.rmtree(log_dir, ignore_errors=True)
        said = (done.stderr.strip() or done.stdout.strip()).replace("sbatch: error: ", "").splitlines()
        raise UsageError(f"sbatch refused the job: {'; '.join(said)}")
    job_id = done.stdout.strip().split(";")[0]
    write_text(log_dir / f"{job_name}-{job_id}.sbatch", script)
    return job_id


def _slurm(argv: list[str]) -> int:
    from mjrl.distributed.slurm import batch_script
    from mjrl.files import make_dirs, prepare_output_file, write_text

    args = list(argv)
    plugins = read_plugins(args)  # `pop_task` imports and removes them; each node's train needs them too
    task = pop_task(args, USAGE)
    if task is None:
        return 0 if args else 2
    mine, train_args = split_args(args)
    train_args = [*(["--plugins", *plugins] if plugins else []), *train_args]
    cfg = parse_flags(SlurmConfig, SlurmConfig(), mine, "mjrl slurm", SlurmConfig.__doc__ or "")
    if cfg.out:  # like every other --out: before any work, one line if it cannot be written
        prepare_output_file(Path(cfg.out))
    job = batch_job(task.name, cfg, train_args)
    script = batch_script(job, shlex.join(["mjrl", "slurm", *argv]))
    if cfg.out:
        make_dirs(Path(cfg.out).parent)  # as every --out: its missing folders are made
        write_text(Path(cfg.out), script)
    if cfg.submit:
        job_id = submit(script, cfg, job.job_name)
        print(f"submitted job {job_id}: logs in {cfg.log_dir}/{job.job_name}-{job_id}*.out")
    elif not cfg.out:
        print(script, end="")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("mjrl slurm", _slurm, argv)


if __name__ == "__main__":
    sys.exit(main())
