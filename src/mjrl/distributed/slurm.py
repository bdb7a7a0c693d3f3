"""Slurm batch scripts that train across nodes: what `mjrl slurm` writes.

One Slurm task per node runs mjrl's launcher (torch's elastic agent), which starts that node's
ranks; the nodes meet at a c10d rendezvous on the job's first node. What the script settles, so
that users do not learn it one failed job at a time:
- the rendezvous id is the job id, which a requeued job keeps: it continues the same run
  directory (and WandB run) from its newest checkpoint;
- the rendezvous port is derived from the job id, so two jobs whose first node is the same
  host do not collide;
- `--requeue` and `--open-mode=append`: a requeued job appends to its log files;
- with a time limit, Slurm signals the batch shell `warn_s` before it (`--signal=B:USR1@...`):
  the script stops the ranks with SIGTERM (they finish the iteration in progress and rank 0
  checkpoints it), then requeues the job, so a long training runs as a chain of jobs;
- a preemption (SIGTERM to every process of the job) lets the ranks checkpoint the same way;
  Slurm then requeues the job itself;
- `srun --kill-on-bad-exit=1`: a rank that dies ends the whole job at once, FAILED, instead of
  leaving the other nodes to wait for it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

from mjrl.errors import UsageError

PORT_BASE = 20000
PORT_SPAN = 10000
"""Rendezvous ports: PORT_BASE + job id modulo PORT_SPAN (below Linux's ephemeral range)."""

# Slurm's time formats: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS,
# DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS.
_TIME = re.compile(r"^(?:(\d+)-(\d+)(?::(\d+)(?::(\d+))?)?|(\d+)(?::(\d+)(?::(\d+))?)?)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


UNLIMITED = ("UNLIMITED", "INFINITE")
"""Slurm's words for no time limit (a job without one is never warned, so never requeues itself)."""


def unlimited(limit: str) -> bool:
    return limit.strip().upper() in UNLIMITED


def time_limit_seconds(limit: str) -> float:
    """Seconds of a Slurm time limit (infinite for UNLIMITED or INFINITE); a UsageError for
    anything Slurm would not take."""
    if unlimited(limit):
        return float("inf")
    match = _TIME.match(limit.strip())
    if not match:
        raise UsageError(
            f"--time {limit!r}: not a Slurm time limit; give MINUTES, HH:MM:SS, DAYS-HH:MM:SS or UNLIMITED "
            "(e.g. 90, 12:00:00, 2-00:00:00)"
        )
    days, hours, minutes, seconds, *plain = match.groups()
    if days is not None:
        d, h, m, sec = int(days), int(hours), int(minutes or 0), int(seconds or 0)
    else:  # MINUTES, MINUTES:SECONDS or HOURS:MINUTES:SECONDS
        values = [int(v) for v in plain if v is not None]
        d, (h, m, sec) = 0, {1: (0, values[0], 0), 2: (0, *values), 3: tuple(values)}[len(values)]
    total = ((d * 24 + h) * 60 + m) * 60 + sec
    if total <= 0:
        raise UsageError(f"--time {limit!r}: a time limit must be more than 0")
    return total


_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9._,:%/@+=-]+$")


def check_directive_value(flag: str, value: str) -> None:
    """A value written into an `#SBATCH` line: sbatch splits those lines at blanks and reads
    quotes its own way, so a value with a blank, a quote or a shell character is refused here
    rather than misread by sbatch after the job is written."""
    if value and not _DIRECTIVE_VALUE.match(value):
        raise UsageError(
            f"{flag} {value!r}: Slurm takes letters, digits and . _ - , : % / @ + = here, without blanks "
            "or quotes; rename it"
        )


def seed_indices(seeds: str) -> list[int]:
    """The seeds of a job array in Slurm's `--array` syntax (`1-8`, `1,3,5`, `0-30:10`)."""
    indices: list[int] = []
    for part in seeds.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise UsageError(f"--seeds {seeds!r}: expected seeds and ranges such as 1-8, 1,3,5 or 0-30:10")
        first, last, step = int(match[1]), int(match[2] or match[1]), int(match[3] or 1)
        if last < first or step < 1:
            raise UsageError(f"--seeds {seeds!r}: {part.strip()} is no range; write FIRST-LAST with FIRST <= LAST")
        indices += range(first, last + 1, step)
    return indices


@dataclasses.dataclass(frozen=True)
class BatchJob:
    """What the batch script trains and on what (checked by `mjrl.cli.slurm`)."""

    task: str
    train_args: tuple[str, ...]
    train_command: str
    nodes: int
    gpus_per_node: int
    ranks_per_node: int
    cpus_per_task: int
    time: str
    warn_s: int
    partition: str
    account: str
    job_name: str
    seeds: str
    log_dir: str
    max_restarts: int


def batch_script(job: BatchJob, command_line: str) -> str:
    """The sbatch script of `job`; `command_line` is recorded in its header."""
    directives = [
        f"--job-name={job.job_name}",
        f"--nodes={job.nodes}",
        "--ntasks-per-node=1",
        *([f"--gpus-per-node={job.gpus_per_node}"] if job.gpus_per_node else []),
        *([f"--cpus-per-task={job.cpus_per_task}"] if job.cpus_per_task else []),
        *([f"--time={job.time}"] if job.time else []),
        *([f"--signal=B:USR1@{job.warn_s}"] if job.time and not unlimited(job.time) else []),
        *([f"--partition={job.partition}"] if job.partition else []),
        *([f"--account={job.account}"] if job.account else []),
        *([f"--array={job.seeds}"] if job.seeds else []),
        "--requeue",
        "--open-mode=append",
        f"--output={job.log_dir}/%x-{'%A_%a' if job.seeds else '%j'}.out",
    ]
    device = "cuda" if job.gpus_per_node else "cpu"
    given = " ".join(shlex.quote(a) for a in (job.train_command, job.task, *job.train_args))
    per_seed = ' --seed "$SLURM_ARRAY_TASK_ID" --run-name "seed-$SLURM_ARRAY_TASK_ID"' if job.seeds else ""
    train_line = (
        f'{given}{per_seed} --device {device} --nproc-per-node {job.ranks_per_node} --nnodes "$SLURM_NNODES" '
        f'--rdzv-endpoint "$head:$port" --rdzv-id "$SLURM_JOB_ID" --max-restarts {job.max_restarts}'
    )
    header = "\n".join(f"#SBATCH {d}" for d in directives)
    return f"""#!/bin/bash
{header}
# Written by: {command_line}
# The run directory (--log-root) must be on a filesystem every node shares; the job's first
# node serves the rendezvous on port $port, which the other nodes must reach.
set -u
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
port=$(({PORT_BASE} + SLURM_JOB_ID % {PORT_SPAN}))  # from the job id: jobs sharing a first node do not collide
echo "mjrl: job $SLURM_JOB_ID (restart ${{SLURM_RESTART_COUNT:-0}}) on $SLURM_JOB_NODELIST, rendezvous $head:$port"

requeue=0
# Slurm's warning before the time limit: stop the ranks (they checkpoint the iteration in
# progress), then requeue this job, which resumes from that checkpoint.
trap 'echo "mjrl: time limit near: checkpointing, then requeueing job $SLURM_JOB_ID"; requeue=1
      scancel --signal=TERM "$SLURM_JOB_ID"' USR1
# A preemption or scancel signals every process of the job: the ranks checkpoint and stop.
trap 'echo "mjrl: stopped by Slurm: the ranks checkpoint and stop"' TERM

srun --kill-on-bad-exit=1 {train_line} &
step=$!
while true; do
  wait "$step"
  status=$?
  kill -0 "$step" 2>/dev/null || break  # a trap ended the wait, not the step
done
if [[ $requeue == 1 ]]; then
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
"""
