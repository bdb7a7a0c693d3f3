"""Fault tolerance with real processes: kills, exceptions, hangs, restarts, preemption,
damaged checkpoints and non-finite numbers (CPU, gloo, 2 ranks); and, in this process, the
checkpoints a stop leaves."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import BIN, TINY_RUN, WARM_UP, free_port, run_cli, run_main

from mjrl.distributed.context import single_process
from mjrl.distributed.preemption import Preempted, StopFlag
from mjrl.metrics_file import read_metrics
from mjrl.runner.config import TrainConfig
from mjrl.runner.hooks import LoopHook
from mjrl.runner.start import train
from mjrl.tasks import load_task

TASK = "Mjrl-Cartpole-Balance"
BASE = TINY_RUN


class Job:
    """A launcher process whose stderr lines are timestamped as they arrive."""

    def __init__(self, *args: str, log_root: Path, command: list[str] | None = None):
        self.log_root = log_root
        argv = command or [str(BIN / "train"), TASK]
        self.proc = subprocess.Popen(
            [*argv, *args, "--log-root", str(log_root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[tuple[float, str]] = []
        self.stdout = ""
        self._readers = [
            threading.Thread(target=self._read_err, daemon=True),
            threading.Thread(target=self._read_out, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line))

    def _read_out(self) -> None:
        self.stdout = self.proc.stdout.read()

    @property
    def stderr(self) -> str:
        return "".join(line for _, line in self.lines)

    def wait(self, timeout: float = 300) -> int:
        code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        return code

    def line_time(self, pattern: str) -> float:
        return next(t for t, line in self.lines if re.search(pattern, line))

    def run_dir(self) -> Path:
        return wait_for(lambda: next((p for p in (self.log_root / TASK).glob("20*") if p.is_dir()), None))


def wait_for(condition, timeout: float = 240.0, poll: float = 0.1):
    """Poll a condition (a file appearing, a line being written) until it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (FileNotFoundError, ValueError):
            value = None
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError("condition not met")


def worker_pids(run_dir: Path) -> dict[int, int]:
    """{rank: pid} of every attempt, from the lines each rank writes at the top of its log."""
    pids = {}
    for log in (run_dir / "ranks").glob("rank_*.log"):
        for m in re.finditer(r"^rank (\d+) pid (\d+)", log.read_text(), re.M):
            pids.setdefault(int(m.group(1)), []).append(int(m.group(2)))
    return pids


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes only once reaped; check its state.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def assert_nothing_left(log_root: Path) -> None:
    for run_dir in (log_root / TASK).glob("20*"):
        for rank, pids in worker_pids(run_dir).items():
            left = [p for p in pids if alive(p) and p != os.getpid()]  # in-process runs are this process
            assert not left, f"rank {rank} processes still alive: {left}"


@pytest.fixture
def log_root(tmp_path: Path):
    root = tmp_path / "logs"
    yield root
    assert_nothing_left(root)


# ------------------------------------------------------------------------ death and hangs


def test_sigkill_of_a_worker_stops_the_job_within_seconds(log_root):
    job = Job(*BASE, "--runner.max-iterations", "200", "--nproc-per-node", "2", log_root=log_root)
    run_dir = job.run_dir()
    wait_for(lambda: len(read_metrics(run_dir / "metrics.jsonl")) >= 1)
    pid = worker_pids(run_dir)[1][0]
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    assert job.wait() == 1
    assert time.monotonic() - killed < 10
    assert re.search(r"rank 1 .*pid \d+\) failed: killed by signal SIGKILL", job.stderr), job.stderr[-2000:]


def test_exception_reaches_the_rank_waiting_in_a_collective(log_root):
    job = Job(
        *BASE, "--runner.max-iterations", "200", "--nproc-per-node", "2", "--fault", "raise@1:2", log_root=log_root
    )
    assert job.wait() == 1
    # The launcher's report names rank 1 and its exception, whichever rank's exit it saw first.
    report = r"^train: rank \d.*(rank 1 failed: )?RuntimeError: injected fault on rank 1"
    assert job.line_time(report) - job.line_time("injecting fault raise") < 10, job.stderr[-3000:]


def test_a_failure_on_one_node_stops_the_other_node(log_root):
    port = free_port()
    args = [
        *BASE,
        "--runner.max-iterations",
        "200",
        "--nproc-per-node",
        "1",
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        f"localhost:{port}",
        "--rdzv-id",
        "fail-two-nodes",
        "--hang-timeout-s",
        "5",
    ]
    nodes = [Job(*args, log_root=log_root) for _ in range(2)]
    run_dir = nodes[0].run_dir()
    wait_for(lambda: len(read_metrics(run_dir / "metrics.jsonl")) >= 1)
    killed = time.monotonic()
    os.kill(worker_pids(run_dir)[1][0], signal.SIGKILL)
    codes = [node.wait() for node in nodes]
    assert all(code != 0 for code in codes), codes
    assert time.monotonic() - killed < 15
    assert any("rank 1" in node.stderr for node in nodes)


def test_a_stopped_worker_is_detected_within_the_hang_timeout(log_root):
    job = Job(
        *BASE, "--runner.max-iterations", "500", "--nproc-per-node", "2", "--hang-timeout-s", "4", log_root=log_root
    )
    run_dir = job.run_dir()
    wait_for(lambda: len(read_metrics(run_dir / "metrics.jsonl")) >= 1)
    stopped = time.monotonic()
    os.kill(worker_pids(run_dir)[1][0], signal.SIGSTOP)
    assert job.wait() == 1
    assert time.monotonic() - stopped < 4 + 5
    assert re.search(r"rank 1 \(node [^)]+\) stopped responding", job.stderr), job.stderr[-2000:]


def test_a_slow_final_phase_on_rank_0_is_not_a_hang(log_root):
    """Rank 1 finishes and exits while rank 0 spends longer than the hang timeout on its last
    checkpoint (an upload, a slow file system): the run succeeded, and nothing is killed."""
    job = Job(
        *BASE, "--runner.max-iterations", "3", "--nproc-per-node", "2", "--hang-timeout-s", "3",
        "--fault", "slow@0:3", log_root=log_root,
    )  # fmt: skip
    assert job.wait() == 0, job.stderr[-2000:]
    assert "injecting fault slow on rank 0 at iteration 3" in job.stderr
    assert "watchdog" not in job.stderr
    assert json.loads(job.stdout.strip().splitlines()[-1])["checkpoint"].endswith("model_000003.pt")


# -------------------------------------------------------------------- restarts and resumes


def assert_complete_history(run_dir: Path, iterations: int, ranks: int = 2) -> None:
    metrics = read_metrics(run_dir / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == list(range(iterations))
    assert [m["env_steps"] for m in metrics] == [(WARM_UP + i + 1) * ranks * 16 * 16 for i in range(iterations)]


@pytest.mark.heavy
@pytest.mark.parametrize("launcher", ["builtin", "torchrun"])
def test_elastic_restart_resumes_from_the_newest_checkpoint(log_root, launcher):
    args = [*BASE, "--runner.max-iterations", "6", "--runner.save-interval", "2", "--fault", "kill@1:3"]
    if launcher == "builtin":
        job = Job(*args, "--nproc-per-node", "2", "--max-restarts", "1", log_root=log_root)
    else:
        torchrun = [
            str(BIN / "torchrun"),
            "--standalone",
            "--nproc_per_node=2",
            "--max-restarts=1",
            "--no_python",
            str(BIN / "train"),
            TASK,
        ]
        job = Job(*args, "--distributed", "True", log_root=log_root, command=torchrun)
    assert job.wait() == 0, job.stderr[-3000:]
    run_dir = job.run_dir()
    assert_complete_history(run_dir, 6)  # every iteration exactly once, env_steps continuous
    attempts = (run_dir / "ranks" / "rank_1.log").read_text()
    assert "attempt 0" in attempts and "attempt 1" in attempts
    # Resumed from the periodic checkpoint at 2, or from the one rank 0 wrote at 3 when the agent
    # stopped it after rank 1 died: at most one checkpoint interval lost.
    resumed = int(re.search(r"resuming at iteration (\d+)", job.stdout).group(1))
    assert resumed in (2, 3)


def test_sigterm_to_the_launcher_checkpoints_and_resume_continues(log_root):
    job = Job(
        *BASE,
        "--runner.max-iterations",
        "300",
        "--runner.save-interval",
        "1000",
        "--nproc-per-node",
        "2",
        log_root=log_root,
    )
    run_dir = job.run_dir()
    wait_for(lambda: len(read_metrics(run_dir / "metrics.jsonl")) >= 3)
    job.proc.send_signal(signal.SIGTERM)
    assert job.wait() == 128 + signal.SIGTERM
    done = len(read_metrics(run_dir / "metrics.jsonl"))
    # No periodic one was due (interval 1000). A signal that lands in a rollout also has rank 0
    # checkpoint the iteration before at once; the stop's own checkpoint supersedes that one.
    checkpoints = [p.name for p in (run_dir / "checkpoints").glob("model_*.pt")]
    assert checkpoints == [f"model_{done:06d}.pt"]
    result = run_main(
        "train", TASK, *BASE, "--log-root", str(log_root), "--resume", "True", "--runner.max-iterations", str(done + 2)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"resuming at iteration {done}" in result.stdout  # one process: launch options are not resumed
    assert [m["iteration"] for m in read_metrics(run_dir / "metrics.jsonl")] == list(range(done + 2))


def test_sigterm_to_one_rank_stops_every_rank_after_the_same_iteration(log_root):
    """Signals reach ranks at different moments (SLURM signals every process itself): the ranks
    agree on where to stop, so none is left alone in a collective and rank 0 checkpoints."""
    job = Job(
        *BASE, "--runner.max-iterations", "300", "--runner.save-interval", "1000", "--nproc-per-node", "2",
        log_root=log_root,
    )  # fmt: skip
    run_dir = job.run_dir()
    wait_for(lambda: len(read_metrics(run_dir / "metrics.jsonl")) >= 3)
    os.kill(worker_pids(run_dir)[1][0], signal.SIGTERM)  # rank 1 only
    assert job.wait() == 128 + signal.SIGTERM, job.stderr[-2000:]
    assert "train: stopped by SIGTERM" in job.stderr
    done = len(read_metrics(run_dir / "metrics.jsonl"))
    assert [p.name for p in (run_dir / "checkpoints").glob("model_*.pt")] == [f"model_{done:06d}.pt"]
    rank_1_iterations = re.findall(r"^rank 1 it (\d+):", (run_dir / "ranks" / "rank_1.log").read_text(), re.M)
    assert int(rank_1_iterations[-1]) == done


def test_a_truncated_newest_checkpoint_is_skipped_on_resume(log_root):
    first = run_main(
        "train", TASK, *BASE, "--log-root", str(log_root), "--runner.max-iterations", "4", "--runner.save-interval", "2"
    )
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = next((log_root / TASK).glob("20*"))
    newest = run_dir / "checkpoints" / "model_000004.pt"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    result = run_main(
        "train", TASK, *BASE, "--log-root", str(log_root), "--resume", "True", "--runner.max-iterations", "5"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (warning,) = [line for line in result.stderr.splitlines() if "skipping" in line]
    assert "model_000004.pt is unreadable" in warning and "give another" not in warning  # it took the one before
    assert "resuming at iteration 2" in result.stdout
    assert [m["iteration"] for m in read_metrics(run_dir / "metrics.jsonl")] == [0, 1, 2, 3, 4]


# ------------------------------------------------------------------ numbers and bad input


def test_nonfinite_actions_reset_only_the_affected_envs(log_root):
    result = run_main(
        "train", TASK, *BASE, "--log-root", str(log_root), "--runner.max-iterations", "3", "--fault", "nan@0:1"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = read_metrics(next((log_root / TASK).glob("20*")) / "metrics.jsonl")
    assert [m["nonfinite_resets"] for m in metrics] == [0, 8 * 16, 0]  # half of 16 envs, every step
    assert all(m["value_loss"] is not None for m in metrics)  # updates stayed finite
    # The NaN envs are masked out of the reward statistics, not spread over them.
    reward_keys = ["mean_step_reward", *(k for k in metrics[1] if k.startswith("reward/"))]
    assert all(m[k] is not None for m in metrics for k in reward_keys), metrics[1]


def test_unreachable_rendezvous_is_a_clear_bounded_error(log_root):
    started = time.monotonic()
    result = run_cli(
        "train",
        TASK,
        *BASE,
        "--log-root",
        str(log_root),
        "--nproc-per-node",
        "1",
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--rdzv-endpoint",
        f"localhost:{free_port()}",
        "--rdzv-id",
        "nobody",
        "--rdzv-timeout-s",
        "3",
    )
    assert result.returncode == 2
    assert time.monotonic() - started < 60
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("train:")]
    assert len(lines) == 1 and "rendezvous" in lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not log_root.exists()


def test_checkpoint_of_another_task_or_shape_is_rejected(log_root):
    first = run_main("train", TASK, *BASE, "--log-root", str(log_root), "--runner.max-iterations", "1")
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = next((log_root / TASK).glob("20*"))
    other = run_main("play", "Mjrl-Cartpole-Swingup", "--run-dir", str(run_dir), "--device", "cpu")
    assert other.returncode == 2 and "belongs to task 'Mjrl-Cartpole-Balance'" in other.stderr
    shape = run_main(
        "train",
        TASK,
        *BASE,
        "--log-root",
        str(log_root),
        "--resume",
        "True",
        "--runner.max-iterations",
        "2",
        "--policy.actor-hidden-dims",
        "8",
    )
    assert shape.returncode == 2 and "does not fit" in shape.stderr and "Traceback" not in shape.stderr
    assert len(list((log_root / TASK).glob("20*"))) == 1


def _one_error_line(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return lines[0]


def test_two_ranks_reject_a_checkpoint_of_another_shape_with_exit_code_2(log_root):
    """Only rank 0 holds the checkpoint; its finding must reach rank 1 before rank 1 waits in a
    collective, or rank 1's watchdog ends the job with 75 and torch reports a traceback."""
    first = run_main("train", TASK, *BASE, "--log-root", str(log_root), "--runner.max-iterations", "1")
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = next((log_root / TASK).glob("20*"))
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    result = run_cli(
        "train",
        TASK,
        *BASE,
        "--log-root",
        str(log_root),
        "--nproc-per-node",
        "2",
        "--resume-dir",
        str(run_dir),
        "--policy.actor-hidden-dims",
        "32",
        "32",
    )
    assert "does not fit" in _one_error_line(result)
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before
    missing = run_cli(
        "train", TASK, *BASE, "--log-root", str(log_root), "--nproc-per-node", "2", "--resume-dir", str(log_root / "no")
    )
    assert "no such run directory" in _one_error_line(missing)


def _failing_rank(rank: int, port: int, log_root: str, out: str) -> None:
    """One rank of a 2-rank job run in-process, as the launcher's worker runs it."""
    from mjrl.cli.train import parse_train_args
    from mjrl.runner.job import rank_worker

    os.environ.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1"
    )
    os.environ["MASTER_PORT"] = str(port)
    task, cfg = parse_train_args([TASK, *BASE, "--log-root", log_root, "--distributed", "True", "--fault", "raise@1:0"])
    try:
        rank_worker(task, cfg)
    except RuntimeError as exc:
        import torch.distributed as dist

        Path(out).write_text(json.dumps({"error": str(exc), "group_left": not dist.is_initialized()}))


def test_a_failing_rank_leaves_the_process_group(tmp_path):
    """The failure path, like the preemption and bad-input paths, destroys the process group
    before the exception leaves the worker (torch's threads must not outlive it; NCCL warns and
    may hang at exit otherwise). Rank 0, whose collective rank 1's leaving broke, ends as its
    watchdog would (75, rank 1's reason), not with an error of its own that would hide the cause."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    port, out = free_port(), tmp_path / "rank1.json"
    ranks = [spawn.Process(target=_failing_rank, args=(r, port, str(tmp_path / "logs"), str(out))) for r in (0, 1)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(timeout=240)
    assert [p.exitcode for p in ranks] == [75, 0], "rank 0: watchdog exit; rank 1: returned after its failure"
    result = json.loads(out.read_text())
    assert result["error"] == "injected fault on rank 1 at iteration 0"
    assert result["group_left"]


def test_bad_input_found_by_the_workers_is_not_restarted(log_root):
    """A pattern that names no joint is only found at the first reward, in the workers: exit 2
    is final whatever --max-restarts allows (each attempt would fail the same way)."""
    bad = ["--env.rewards.joint-deviation", "-1", "--env.rewards.joint-deviation-joints", "nothing*"]
    result = run_cli("train", "Mjrl-Velocity-Flat-Quadruped", *BASE, *bad, "--nproc-per-node", "2",
                     "--max-restarts", "3", "--log-root", str(log_root))  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "match none of the joints" in line]
    assert 1 <= len(errors) <= 2, result.stderr[-3000:]  # one attempt: at most one line per rank
    assert "Traceback" not in result.stderr


def test_bad_output_on_one_rank_ends_the_job_without_a_restart(log_root):
    """Rank 0 alone cannot write its checkpoint (over a file-size limit): the other rank, told
    through the abort, exits 2 as well, so whichever exit the agent sees first, nothing restarts."""
    short = ("--runner.save-interval", "1", "--runner.max-iterations", "3")
    result = run_cli("train", TASK, *BASE, *short, "--nproc-per-node", "2", "--max-restarts", "2",
                     "--log-root", str(log_root), file_size_limit=50_000)  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    assert len([line for line in result.stderr.splitlines() if "cannot write" in line]) == 1, result.stderr[-3000:]
    assert "watchdog" not in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
    (run_dir,) = (log_root / TASK).glob("20*")
    attempts = re.findall(r"^rank 0 pid \d+ ", (run_dir / "ranks" / "rank_0.log").read_text(), re.M)
    assert len(attempts) == 1


class StopAt(LoopHook):
    """Asks the run to stop (as SIGTERM does) as iteration `iteration` starts: the signal lands in
    its rollout, so rank 0 checkpoints the iteration before at once, and the iteration completes."""

    def __init__(self, iteration: int, stop: StopFlag):
        self.iteration, self.stop = iteration, stop

    def iteration_start(self, iteration: int, algorithm: object) -> bool:
        if iteration == self.iteration:
            self.stop.requested = signal.SIGTERM
        return False


def stopped_run(log_root: Path, stop_at: int, resume: bool = False) -> list[str]:
    """Train the cart-pole in this process until `StopAt(stop_at)` stops it; its checkpoints."""
    task = load_task(TASK)
    defaults = TrainConfig.for_task(task)
    cfg = dataclasses.replace(
        defaults,
        env=dataclasses.replace(task.env_cfg, num_envs=8),
        runner=dataclasses.replace(defaults.runner, num_steps_per_env=8, save_interval=2, max_iterations=10),
        device="cpu", logger="none", log_root=str(log_root), resume=resume,
    )  # fmt: skip
    stop = StopFlag()
    with pytest.raises(Preempted):
        train(task, cfg, single_process("cpu"), stop, hooks=[StopAt(stop_at, stop)])
    return sorted(p.name for p in log_root.glob(f"{TASK}/*/checkpoints/model_*.pt"))


@pytest.mark.parametrize(
    ("stop_at", "kept"),
    [
        (0, ["model_000001.pt"]),  # the one of iteration 0 is gone: never a periodic one
        (3, ["model_000002.pt", "model_000004.pt"]),  # 3's is gone, the periodic 2 stays
        (2, ["model_000002.pt", "model_000003.pt"]),  # the stop rewrote the periodic 2: it stays
    ],
)
def test_a_stop_leaves_one_checkpoint_of_its_own(tmp_path, stop_at, kept):
    assert stopped_run(tmp_path, stop_at) == kept


def test_a_stop_right_after_a_resume_keeps_the_checkpoint_it_resumed_from(tmp_path):
    assert stopped_run(tmp_path, 0) == ["model_000001.pt"]
    assert stopped_run(tmp_path, 1, resume=True) == ["model_000001.pt", "model_000002.pt"]
