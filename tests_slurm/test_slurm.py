"""mjrl's batch scripts (`mjrl slurm`) on a real two-node Slurm cluster, CPU and gloo: training
across nodes, requeues, preemption, a rank killed, time limits."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import yaml
from conftest import (
    MJRL,
    TASK,
    checkpoints,
    job,
    log_text,
    logged_iterations,
    run_dirs,
    submit,
    train_flags,
    train_processes,
    wait_for,
    wait_until_ended,
)


def one_run(folder: Path) -> Path:
    runs = run_dirs(folder)
    assert len(runs) == 1, f"expected one run directory, found {runs}"
    return runs[0]


def wait_for_iterations(folder: Path, count: int, timeout_s: float = 120) -> None:
    def logged() -> bool:
        runs = run_dirs(folder)
        return bool(runs) and len(logged_iterations(runs[0])) >= count

    wait_for(f"{count} iterations in {folder}", logged, timeout_s)


def test_two_jobs_on_the_same_first_node_each_train_across_both_nodes_into_one_run(tmp_path: Path) -> None:
    folders = [tmp_path / "a", tmp_path / "b"]
    ids = []
    for folder in folders:
        folder.mkdir()
        ids.append(submit(folder, *train_flags(folder, 10)))
    records = [wait_until_ended(job_id, 240) for job_id in ids]
    for folder, job_id, record in zip(folders, ids, records, strict=True):
        log = log_text(folder, job_id)
        assert record["JobState"] == "COMPLETED", log
        assert record["NodeList"] == "node[1-2]"
        assert "32 envs (16 x 2 ranks)" in log  # one rank on each node, one training
        assert logged_iterations(one_run(folder)) == list(range(10))
    # They ran at once, both with node1 first, each at a port of its own.
    assert records[1]["StartTime"] < records[0]["EndTime"] and records[0]["StartTime"] < records[1]["EndTime"]
    ports = [re.search(r"rendezvous node1:(\d+)", log_text(f, i))[1] for f, i in zip(folders, ids, strict=True)]
    assert ports[0] != ports[1]


def test_a_requeued_job_continues_its_run_and_wandb_run_with_every_iteration_logged_once(tmp_path: Path) -> None:
    os.environ["WANDB_MODE"] = "offline"  # the job inherits the submitter's environment
    iterations = 40
    job_id = submit(tmp_path, *train_flags(tmp_path, iterations, save_interval=5, logger="wandb"))
    wait_for_iterations(tmp_path, 10)
    subprocess.run(["scontrol", "requeue", job_id], check=True)
    record = wait_until_ended(job_id, 300)
    log = log_text(tmp_path, job_id)
    assert record["JobState"] == "COMPLETED" and record["Restarts"] == "1", log
    # One log file, appended to: both runs of the job are in it.
    assert f"job {job_id} (restart 0)" in log and f"job {job_id} (restart 1)" in log
    run = one_run(tmp_path)
    resumed = int(re.search(r"resuming .* from iteration (\d+)", log)[1])
    assert resumed >= 5 and resumed in checkpoints(run)
    assert logged_iterations(run) == list(range(iterations))  # none lost, none twice
    offline_runs = sorted((run / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == 2 and len({p.name.rsplit("-", 1)[1] for p in offline_runs}) == 1, offline_runs


def test_a_preempted_job_checkpoints_the_iteration_in_progress_and_resumes_from_it(tmp_path: Path) -> None:
    iterations = 40
    job_id = submit(tmp_path, "--partition", "low", *train_flags(tmp_path, iterations))
    wait_for_iterations(tmp_path, 10)
    # A job of a higher priority tier that needs both nodes whole: Slurm requeues ours.
    urgent = subprocess.run(
        ["sbatch", "--parsable", "--partition", "high", "--nodes", "2", "--exclusive", "--wrap", "true",
         "--output", str(tmp_path / "urgent-%j.out")],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert wait_until_ended(urgent, 120)["JobState"] == "COMPLETED"
    record = wait_until_ended(job_id, 300)
    log = log_text(tmp_path, job_id)
    assert record["JobState"] == "COMPLETED" and record["Restarts"] == "1", log
    run = one_run(tmp_path)
    resumed = int(re.search(r"resuming .* from iteration (\d+)", log)[1])
    # No periodic checkpoint before the end: the one it resumed from is the preemption's alone
    # (the one of the iteration before, saved at once if the signal came in a rollout, is gone).
    assert resumed >= 10 and checkpoints(run) == [resumed, iterations]
    assert logged_iterations(run) == list(range(iterations))


def kill_a_nodes_launcher(folder: Path, node: str) -> str:
    """Submit a long training, SIGKILL `node`'s launcher once it trains, and return the job's
    log, checking that the job ended FAILED, not requeued, within 20 s of the kill."""
    job_id = submit(folder, *train_flags(folder, 2000))
    wait_for_iterations(folder, 5)
    launchers = train_processes(node, job_id)
    assert len(launchers) == 1, f"{node} runs launchers {launchers}"
    killed = time.monotonic()
    os.kill(launchers[0], signal.SIGKILL)
    record = wait_until_ended(job_id, 60)
    took = time.monotonic() - killed
    log = log_text(folder, job_id)
    assert record["JobState"] == "FAILED" and record["Restarts"] == "0", log
    assert took < 20, f"the job took {took:.0f} s to end"
    return log


def test_a_rank_killed_on_one_node_ends_the_job_failed_within_seconds_naming_it(tmp_path: Path) -> None:
    log = kill_a_nodes_launcher(tmp_path, "node2")
    # The log names the node, its task and the cause: srun's line, and the surviving node's rank
    # in mjrl's words, whichever node drew rank 0. The dead launcher's rank posts why as soon as
    # its launcher dies (torch's parent-death SIGINT, or its watchdog's pidfd), at the store
    # node 1's launcher serves, before srun ends it; the survivor repeats it. No mjrl line
    # blames bad input or the survivor.
    assert "srun: error: node2: task 1: Killed" in log, log
    assert re.search(r"^nodes node\d: rank \d \| node\d: rank \d$", log, re.M), log
    dead, alive = (re.search(rf"{node}: rank (\d)", log)[1] for node in ("node2", "node1"))
    assert f"mjrl watchdog (rank {alive}): rank {dead} (node node2) failed: its launcher (pid " in log, log
    for line in re.findall(r"^mjrl watchdog .*$", log, re.M):
        assert re.search(rf"rank {dead} \(node node2\) failed: its launcher \(pid \d+\) died", line), log
    assert "no rendezvous" not in log  # they had met: a lost store is no bad input


def test_losing_the_node_that_serves_the_rendezvous_store_is_named(tmp_path: Path) -> None:
    """Node 0 (node1, the first of the allocation) serves the rendezvous store that the other
    node's launcher and its ranks' watchdogs meet at: its launcher killed, the survivors lose
    the store and say which node went and that it was the store's host."""
    log = kill_a_nodes_launcher(tmp_path, "node1")
    assert "srun: error: node1: task 0: Killed" in log, log
    # The watchdogs' lines name node1 as the store's host: the dead node's rank, whose launcher
    # died (noticed at once), and the survivor, which lost the store, when its next tick comes
    # before srun's SIGTERM (after which a stopping rank no longer needs the store, and the
    # survivor's launcher says only that it was stopped).
    dead = re.search(r"node1: rank (\d)", log)[1]
    lines = re.findall(r"^mjrl watchdog .*$", log, re.M)
    lost = f"node node1, the rendezvous store's host (rank {dead} ran there), is gone or unreachable: lost the"
    died = rf"rank {dead} \(node node1, the rendezvous store's host\) failed: its launcher \(pid \d+\) died"
    assert lines and all(lost in line or re.search(died, line) for line in lines), log
    assert "no rendezvous" not in log


def test_a_job_warned_of_its_time_limit_checkpoints_and_requeues_itself(tmp_path: Path) -> None:
    # Slurm signals 90 s before the 2-minute limit, or up to a minute earlier.
    job_id = submit(tmp_path, "--time", "2", "--warn-s", "90", *train_flags(tmp_path, 5000))
    log = str(wait_for("the job's restart", lambda: "(restart 1)" in (t := log_text(tmp_path, job_id)) and t, 150))
    assert "time limit near" in log
    wait_for("the resume", lambda: re.search(r"resuming .* from iteration (\d+)", log_text(tmp_path, job_id)), 60)
    subprocess.run(["scancel", job_id], check=True)
    run = one_run(tmp_path)
    resumed = int(re.search(r"resuming .* from iteration (\d+)", log_text(tmp_path, job_id))[1])
    assert resumed > 0 and resumed in checkpoints(run)  # the stop's checkpoint (periodic ones: every 1000)
    assert int(job(job_id)["Restarts"]) >= 1  # a second warning may have come meanwhile


def test_seeds_run_as_a_job_array_each_task_training_its_own_seed(tmp_path: Path) -> None:
    array_id = submit(tmp_path, "--seeds", "1-2", *train_flags(tmp_path, 3))

    def states() -> list[str] | None:
        out = subprocess.run(["scontrol", "-o", "show", "job", array_id], capture_output=True, text=True).stdout
        found = re.findall(r"JobState=(\w+)", out)
        ended = len(found) == 2 and all(s not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING") for s in found)
        return found if ended else None

    assert wait_for("both array tasks to end", states, 240) == ["COMPLETED", "COMPLETED"]
    runs = sorted(run_dirs(tmp_path), key=lambda run: run.name[-6:])
    assert [run.name[-6:] for run in runs] == ["seed-1", "seed-2"]
    for run, seed in zip(runs, (1, 2), strict=True):
        assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == seed
        assert logged_iterations(run) == [0, 1, 2]
    assert len(list((tmp_path / "slurm-logs").glob(f"*-{array_id}_[12].out"))) == 2


def test_a_job_sbatch_refuses_is_one_line_exit_2_with_nothing_left(tmp_path: Path) -> None:
    done = subprocess.run(
        [MJRL, "slurm", TASK, "--nodes", "2", "--gpus-per-node", "0", "--partition", "nope", "--submit", "True"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "sbatch refused the job" in done.stderr and "partition" in done.stderr
    assert list(tmp_path.iterdir()) == []
