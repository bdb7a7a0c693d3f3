"""The batch script `mjrl slurm` writes, read as Slurm and bash would (the cluster runs it in
`tests_slurm/`)."""

from __future__ import annotations

import re
import subprocess

from conftest import run_main

BALANCE = "Mjrl-Cartpole-Balance"


def script(*args: str) -> str:
    result = run_main("mjrl", "slurm", BALANCE, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_script_asks_slurm_for_what_the_job_needs_and_is_valid_bash(tmp_path) -> None:
    text = script("--nodes", "4", "--gpus-per-node", "8", "--time", "1-12:00:00", "--partition", "gpu",
                  "--env.num-envs", "4096", "--log-root", "/shared/runs")  # fmt: skip
    directives = re.findall(r"^#SBATCH (\S+)$", text, re.M)
    assert directives == [
        f"--job-name={BALANCE}", "--nodes=4", "--ntasks-per-node=1", "--gpus-per-node=8", "--time=1-12:00:00",
        "--signal=B:USR1@120", "--partition=gpu", "--requeue", "--open-mode=append",
        "--output=slurm-logs/%x-%j.out",
    ]  # fmt: skip
    (srun,) = [line for line in text.splitlines() if line.startswith("srun ")]
    assert srun.startswith("srun --kill-on-bad-exit=1 ") and srun.endswith(" &")
    train = srun.split(" ", 2)[2]
    assert f" {BALANCE} --env.num-envs 4096 --log-root /shared/runs --device cuda --nproc-per-node 8 " in f" {train}"
    assert '--nnodes "$SLURM_NNODES" --rdzv-endpoint "$head:$port" --rdzv-id "$SLURM_JOB_ID"' in train
    path = tmp_path / "job.sh"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0


def test_the_plugins_that_register_the_task_reach_every_nodes_train() -> None:
    """`--plugins` before or after the task: imported here to check the task, and passed on to
    the job's `train`, whose node would not know a task a plugin registers without it."""
    for given in (["--plugins=mjrl.tasks", BALANCE], [BALANCE, "--plugins", "mjrl.tasks"]):
        result = run_main("mjrl", "slurm", *given, "--nodes", "2", "--gpus-per-node", "0")
        assert result.returncode == 0, result.stderr
        (srun,) = [line for line in result.stdout.splitlines() if line.startswith("srun ")]
        assert f" {BALANCE} --plugins mjrl.tasks " in srun, srun


def test_the_rendezvous_port_comes_from_the_job_id(tmp_path) -> None:
    text = script("--nodes", "2", "--gpus-per-node", "0")
    (line,) = [line for line in text.splitlines() if line.startswith("port=")]
    ports = []
    for job_id in ("7", "8", "10007"):
        shell = f"SLURM_JOB_ID={job_id}\n{line}\necho $port"
        ports.append(int(subprocess.run(["bash", "-c", shell], capture_output=True, text=True).stdout))
    assert ports[0] != ports[1] and all(20000 <= p < 30000 for p in ports)


def test_seeds_make_a_job_array_each_task_training_its_own_seed(tmp_path) -> None:
    text = script("--nodes", "1", "--gpus-per-node", "1", "--seeds", "1-8")
    assert "#SBATCH --array=1-8" in text and "#SBATCH --output=slurm-logs/%x-%A_%a.out" in text
    assert '--seed "$SLURM_ARRAY_TASK_ID" --run-name "seed-$SLURM_ARRAY_TASK_ID"' in text
    out = tmp_path / "job.sh"
    assert run_main("mjrl", "slurm", BALANCE, "--seeds", "1,3,5", "--out", str(out)).returncode == 0
    assert "#SBATCH --array=1,3,5" in out.read_text()


def test_an_unlimited_job_asks_for_no_warning_and_unsafe_directive_values_are_refused(tmp_path) -> None:
    """`--time UNLIMITED` (or INFINITE), which Slurm takes, is written as given and without the
    time-limit warning (nothing to warn of). A value sbatch would split or misquote in an
    `#SBATCH` line (a blank, a quote) is one line, exit 2, nothing written."""
    text = script("--gpus-per-node", "0", "--time", "UNLIMITED")
    directives = re.findall(r"^#SBATCH (\S+)$", text, re.M)
    assert "--time=UNLIMITED" in directives and not [d for d in directives if d.startswith("--signal")]
    assert "--time=infinite" in script("--gpus-per-node", "0", "--time", "infinite")
    out = tmp_path / "job.sh"
    for flag, value in (("--job-name", "my job"), ("--partition", "gpu'; rm -rf /"), ("--account", 'a"b'),
                        ("--log-dir", "logs here")):  # fmt: skip
        result = run_main("mjrl", "slurm", BALANCE, "--gpus-per-node", "0", flag, value, "--out", str(out))
        assert result.returncode == 2 and f"{flag} {value!r}: Slurm takes letters" in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()
    result = run_main("mjrl", "slurm", BALANCE, "--gpus-per-node", "0", "--time", "forever")
    assert result.returncode == 2 and "or UNLIMITED" in result.stderr
    # --out makes its missing folders, as every other --out does
    deep = tmp_path / "jobs" / "balance" / "job.sh"
    assert run_main("mjrl", "slurm", BALANCE, "--gpus-per-node", "0", "--out", str(deep)).returncode == 0
    assert deep.read_text().startswith("#!/bin/bash\n#SBATCH --job-name=")
