"""Distributed training with real processes: torchrun, the built-in launcher, two nodes on one
machine, bit-identical replicas in both sync modes, and the replica check (CPU, gloo)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import BIN, TINY_RUN, WARM_UP, free_port, last_json, run_cli, run_main

from mjrl.checkpoint import load_checkpoint
from mjrl.metrics_file import read_metrics
from mjrl.runner.runner import parameters_sha256

TASK = "Mjrl-Cartpole-Balance"
SMALL = [
    *TINY_RUN,
    "--runner.max-iterations",
    "3",
    "--runner.replica-check-interval",
    "1",
]
STEPS_PER_RANK_ITERATION = 16 * 16


def only_run_dir(log_root: Path) -> Path:
    runs = [p for p in (log_root / TASK).iterdir() if not p.name.startswith(".")]
    assert len(runs) == 1, runs
    return runs[0]


def checkpoint_sha256(path: Path) -> str:
    """The digest of the policy a checkpoint holds, rebuilt as play rebuilds it (any kind)."""
    from mjrl.obs_spec import flat_spec
    from mjrl.rl.config import PolicyConfig
    from mjrl.rl.policies import load_policy

    state = load_checkpoint(path)
    spec = flat_spec(state["obs_dims"])
    return parameters_sha256(load_policy(state, path, PolicyConfig(), spec, state["num_actions"], torch.device("cpu")))


def test_torchrun_two_ranks_one_run_directory_written_by_rank_0(log_root):
    result = subprocess.run(
        [
            str(BIN / "torchrun"),
            "--standalone",
            "--nproc_per_node=2",
            "--no_python",
            str(BIN / "train"),
            TASK,
            "--distributed",
            "True",
            *SMALL,
            "--log-root",
            str(log_root),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = only_run_dir(log_root)
    metrics = read_metrics(run_dir / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == [0, 1, 2]  # one writer: no duplicated lines
    assert [m["env_steps"] for m in metrics] == [2 * STEPS_PER_RANK_ITERATION * (WARM_UP + i + 1) for i in range(3)]
    assert sorted(p.name for p in (run_dir / "ranks").iterdir()) == ["rank_0.log", "rank_1.log"]
    rank1 = (run_dir / "ranks" / "rank_1.log").read_text()
    assert "rank 1 it 3" in rank1 and "it 3/3" not in rank1  # rank 1 logs its own lines only
    assert "it 3/3" in (run_dir / "ranks" / "rank_0.log").read_text()
    assert result.stdout.count('"run_dir"') == 1  # only rank 0 prints the summary
    assert "32 envs (16 x 2 ranks)" in result.stdout


def test_each_torchrun_without_a_job_id_starts_a_new_run(log_root):
    """torchrun's rendezvous id is "none" unless `--rdzv-id` (or `--standalone`) gives one, so
    a second launch into the same log root must not take the first launch's run for its own."""

    def launch() -> subprocess.CompletedProcess:
        command = [str(BIN / "torchrun"), "--nproc_per_node=1", f"--master_port={free_port()}", "--no_python"]
        command += [str(BIN / "train"), TASK, "--distributed", "True", *SMALL, "--log-root", str(log_root)]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)

    first = launch()
    assert first.returncode == 0, first.stderr[-3000:]
    second = launch()
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resuming" not in second.stdout
    runs = sorted(p for p in (log_root / TASK).iterdir() if not p.name.startswith("."))
    assert len(runs) == 2, runs
    for run_dir in runs:
        assert [m["iteration"] for m in read_metrics(run_dir / "metrics.jsonl")] == [0, 1, 2]


def test_torchruns_default_job_id_continues_only_its_own_restarts(tmp_path):
    """Rank 0 records the run under torchrun's id "none" and its agent's pid (the worker's
    parent): a restart continues that run, a new launch (restart count 0) starts its own, and
    two launches at once (two agents) never share a record."""
    from mjrl.distributed.context import DistContext
    from mjrl.runner.config import TrainConfig
    from mjrl.runner.resume import choose_run_dir
    from mjrl.tasks import load_task

    cfg = dataclasses.replace(TrainConfig.for_task(load_task(TASK)), log_root=str(tmp_path))

    def pick(restart: int) -> tuple[Path, bool]:
        return choose_run_dir(TASK, cfg, DistContext(torch.device("cpu"), job_id="none", restart_count=restart))

    first, resume = pick(0)
    assert not resume and pick(1) == (first, False)  # no checkpoint yet: nothing to resume from
    second, resume = pick(0)
    assert second != first and not resume
    assert pick(2)[0] == second
    assert (tmp_path / TASK / ".jobs" / f"none-{os.getppid()}").read_text() == str(second)


def test_the_launcher_config_leaves_out_what_an_older_torch_lacks(monkeypatch):
    """torch 2.11 (the GPU machine's) has no `LaunchConfig.shutdown_timeout`: the built-in
    launcher stopped there with a TypeError before it started a worker."""
    from torch.distributed.launcher.api import LaunchConfig

    import mjrl.distributed.launch as launch
    from mjrl.distributed.options import LaunchOptions

    def same_default(f: dataclasses.Field) -> dataclasses.Field:
        if f.default_factory is not dataclasses.MISSING:
            return dataclasses.field(default_factory=f.default_factory)
        return dataclasses.field(default=f.default)

    kept = [(f.name, f.type, same_default(f)) for f in dataclasses.fields(LaunchConfig) if f.name != "shutdown_timeout"]
    monkeypatch.setattr(launch, "LaunchConfig", dataclasses.make_dataclass("LaunchConfig", kept))
    config = launch.launch_config(LaunchOptions(nproc_per_node=2))
    assert config.nproc_per_node == 2 and config.start_method == "spawn"
    assert not hasattr(config, "shutdown_timeout")
    # A field that no torch release is known to lack is not dropped: a misspelt one fails.
    kept = [(name, kind, f) for name, kind, f in kept if name != "monitor_interval"]
    monkeypatch.setattr(launch, "LaunchConfig", dataclasses.make_dataclass("LaunchConfig", kept))
    with pytest.raises(TypeError, match="monitor_interval"):
        launch.launch_config(LaunchOptions(nproc_per_node=2))


@pytest.mark.parametrize("sync", ["gradients", "rollout", "gradients-gru"])
def test_builtin_launcher_returns_rank_results_with_identical_parameters(log_root, sync):
    """Two ranks in lockstep: the same weights on both, with either sync mode, and with a
    recurrent policy (each rank carries its own envs' states; the replica check runs)."""
    memory = ["--policy.rnn-type", "gru", "--policy.rnn-hidden-size", "8"] if sync.endswith("gru") else []
    result = run_cli(
        "train", TASK, *SMALL, "--log-root", str(log_root), "--nproc-per-node", "2", "--algorithm.sync",
        sync.removesuffix("-gru"), "--runner.replica-check-interval", "1", *memory,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)
    assert set(summary["ranks"]) == {"0", "1"}
    assert summary["env_steps"] == (WARM_UP + 3) * 2 * STEPS_PER_RANK_ITERATION
    digests = {r["parameters_sha256"] for r in summary["ranks"].values()}
    assert len(digests) == 1  # bit-identical weights and normaliser on both ranks
    assert digests == {checkpoint_sha256(Path(summary["checkpoint"]))}
    assert summary["ranks"]["1"]["checkpoint"] is None  # only rank 0 writes checkpoints
    metrics = read_metrics(Path(summary["run_dir"]) / "metrics.jsonl")
    assert all(0 < m["collective_s"] < m["collection_s"] + m["learning_s"] for m in metrics)


@pytest.mark.parametrize("rendezvous", ["c10d", "static"])
def test_two_nodes_on_one_machine(log_root, rendezvous):
    """Both rendezvous kinds; a static one gives each node its own --node-rank, which the ranks'
    check that they train the same config must not count as a difference. Each node named as a
    scheduler names it (SLURMD_NODENAME, as on a cluster whose nodes share a host): the header
    says which ranks each one runs."""
    port = free_port()
    node_args = [
        *SMALL,
        "--log-root",
        str(log_root),
        "--nproc-per-node",
        "1",
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        f"localhost:{port}",
        "--rdzv-id",
        "two-nodes",
    ]
    ranks = [["--node-rank", str(node)] if rendezvous == "static" else [] for node in range(2)]
    nodes = [
        subprocess.Popen(
            [str(BIN / "train"), TASK, *node_args, *rank],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "SLURMD_NODENAME": f"node{node}"},
        )
        for node, rank in enumerate(ranks)
    ]
    outputs = [node.communicate(timeout=300) for node in nodes]
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 0, err[-3000:]
    summaries = [last_json(out) for out, _ in outputs]
    assert {r for s in summaries for r in s["ranks"]} == {"0", "1"}
    assert summaries[0]["run_dir"] == summaries[1]["run_dir"]  # rank 0's choice reached both nodes
    headers = [line for out, _ in outputs for line in out.splitlines() if line.startswith("nodes ")]
    assert headers in (["nodes node0: rank 0 | node1: rank 1"], ["nodes node1: rank 0 | node0: rank 1"])
    assert read_metrics(Path(summaries[0]["run_dir"]) / "metrics.jsonl")[-1]["env_steps"] == (WARM_UP + 3) * 2 * 256


def test_nodes_given_different_configs_stop_before_training(log_root):
    """Each node parses its own command line (and a resume reads the run's config from its
    own disk): a node given another experiment must not train beside rank 0's."""
    port = free_port()
    common = [*SMALL, "--log-root", str(log_root), "--nproc-per-node", "1", "--nnodes", "2",
              "--rdzv-endpoint", f"localhost:{port}", "--rdzv-id", "two-configs"]  # fmt: skip
    commands = [[str(BIN / "train"), TASK, *common, *extra] for extra in ([], ["--algorithm.entropy-coef", "0.02"])]
    nodes = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in commands]
    outputs = [node.communicate(timeout=300) for node in nodes]
    for node, (_, err) in zip(nodes, outputs, strict=True):
        assert node.returncode == 2, err[-3000:]
        assert "another config than rank 0" in err and "Traceback" not in err
    assert not list((log_root / TASK).glob("20*"))  # no run directory was made


def test_replica_check_stops_a_run_whose_ranks_diverge(log_root):
    result = run_cli(
        "train", TASK, *SMALL, "--log-root", str(log_root), "--nproc-per-node", "2", "--fault", "perturb@1:1"
    )
    assert result.returncode == 1
    assert "rank(s) [1] differ from rank 0" in result.stderr


def test_distributed_flag_needs_a_launcher_and_excludes_nproc_per_node(log_root):
    distributed = ("train", TASK, *SMALL, "--log-root", str(log_root), "--distributed", "True")
    alone = run_main(*distributed)
    assert alone.returncode == 2 and "needs a launcher" in alone.stderr and "Traceback" not in alone.stderr
    both = run_main(*distributed, "--nproc-per-node", "2")
    assert both.returncode == 2 and "give one of them" in both.stderr
    assert not log_root.exists()


def test_launcher_rejects_more_processes_than_gpus(log_root):
    result = run_main(
        "train", TASK, *SMALL[2:], "--device", "cuda", "--log-root", str(log_root), "--nproc-per-node", "2"
    )
    assert result.returncode == 2
    assert f"this node has {torch.cuda.device_count()} CUDA device(s)" in result.stderr
    assert not log_root.exists()


@pytest.mark.heavy
def test_two_ranks_learn_about_as_well_as_one_rank_with_the_same_total_envs(tmp_path):
    """2 ranks x 128 envs against 1 rank x 256 envs, same seed, 20 iterations.

    Score: the mean reward per step over the last 5 iterations (8192 samples each). With Balance's
    defaults of 2026-11-28 (mirror images, KL target 0.005), single-rank runs of seeds 1-3 scored
    0.44-0.48 at iteration 20 (0.82-0.90 at 40), 0.18-0.23 over their first iteration, and two
    ranks of seed 1 0.49 against one rank's 0.48 (docs/benchmarks.md). So the two setups must
    agree within 0.15, three times that spread, and both must have learned clearly (+0.08 over
    their first iteration). The exact equivalence of the update itself is checked in
    test_collectives.py."""
    common = [
        TASK,
        "--device",
        "cpu",
        "--logger",
        "none",
        "--env.episode-length-s",
        "5",
        "--runner.num-steps-per-env",
        "32",
        "--runner.max-iterations",
        "20",
        "--seed",
        "1",
    ]
    # Side by side: each run is seeded and deterministic, so sharing the cores changes its time,
    # not its curve, and the test takes the time of the longer run rather than of both.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        one_run = pool.submit(
            run_cli, "train", *common, "--env.num-envs", "256", "--log-root", str(tmp_path / "one"), timeout=600
        )
        two_run = pool.submit(
            run_cli, "train", *common, "--env.num-envs", "128", "--nproc-per-node", "2",
            "--log-root", str(tmp_path / "two"), timeout=600,
        )  # fmt: skip
        one, two = one_run.result(), two_run.result()
    scores = {}
    for name, result in (("one", one), ("two", two)):
        assert result.returncode == 0, result.stderr[-2000:]
        metrics = read_metrics(Path(last_json(result.stdout)["run_dir"]) / "metrics.jsonl")
        assert metrics[-1]["env_steps"] == (WARM_UP + 20) * 256 * 32
        last5 = sum(m["mean_step_reward"] for m in metrics[-5:]) / 5
        scores[name] = last5
        assert last5 > metrics[0]["mean_step_reward"] + 0.08, (name, last5, metrics[0]["mean_step_reward"])
    assert abs(scores["two"] - scores["one"]) < 0.15, scores


def test_one_named_gpu_is_refused_for_several_ranks_per_node(log_root):
    """`--device cuda:N` would put every rank of the node on GPU N. Refused before any CUDA
    query, so this holds on machines with any number of GPUs (none here, or several)."""
    from mjrl.distributed.devices import resolve_device
    from mjrl.errors import UsageError

    with pytest.raises(UsageError, match="--device cuda:1 names one GPU"):
        resolve_device("cuda:1", local_rank=1, local_world_size=2)
    result = run_main(
        "train", TASK, *SMALL[2:], "--device", "cuda:0", "--log-root", str(log_root), "--nproc-per-node", "2"
    )
    assert result.returncode == 2 and "--device cuda:0 names one GPU" in result.stderr, result.stderr[-2000:]
    assert not log_root.exists()


# ------------------------------------------ device choice: shared GPUs and per-rank isolation


@pytest.mark.parametrize(
    ("spec", "local_rank", "local_world_size", "count", "own", "expected"),
    [
        ("cuda", 3, 8, 8, False, 3),  # torchrun on an 8-GPU node: one GPU each
        ("auto", 3, 8, 8, False, 3),
        ("cuda", 3, 8, 1, True, 0),  # SLURM --gpus-per-task=1: the one GPU it sees
        ("cuda", 3, 8, 2, True, 1),  # --gpus-per-task=2: local_rank % 2, its own either way
        ("cuda:0", 3, 8, 1, True, 0),  # cuda:N with GPUs of their own: each rank's own GPU 0
        ("cuda:1", 0, 1, 2, False, 1),  # one rank: the GPU it names
        ("cuda", 0, 1, 1, False, 0),
    ],
)
def test_each_rank_gets_a_cuda_device_of_its_own(spec, local_rank, local_world_size, count, own, expected):
    from mjrl.distributed.devices import _named_cuda_index, pick_cuda_device

    assert pick_cuda_device(spec, _named_cuda_index(spec), local_rank, local_world_size, count, own) == expected


@pytest.mark.parametrize(
    ("spec", "local_rank", "local_world_size", "count", "own", "message"),
    [
        ("cuda:1", 1, 2, 4, False, "--device cuda:1 names one GPU"),  # every rank on GPU 1
        ("cuda", 1, 8, 4, False, "8 processes per node but this node has 4 CUDA device"),
        ("cuda", 1, 2, 1, False, "2 processes per node but this node has 1 CUDA device"),
        ("cuda:2", 0, 1, 2, False, "--device cuda:2: this process sees 2 CUDA device"),
        ("cuda:1", 3, 8, 1, True, "--device cuda:1: this process sees 1 CUDA device"),
        ("cuda", 0, 1, 0, False, "no CUDA device is available here"),
    ],
)
def test_devices_that_ranks_would_share_or_that_do_not_exist_are_refused(
    spec, local_rank, local_world_size, count, own, message
):
    from mjrl.distributed.devices import _named_cuda_index, pick_cuda_device
    from mjrl.errors import UsageError

    with pytest.raises(UsageError, match=re.escape(message)):
        pick_cuda_device(spec, _named_cuda_index(spec), local_rank, local_world_size, count, own)


@pytest.mark.parametrize(
    ("local_world_size", "count", "visible", "own"),
    [
        (8, 1, "3", True),  # SLURM sets the task's GPU; the process sees 1 of the node's 8
        (8, 2, "4,5", True),
        (8, 1, None, False),  # no CUDA_VISIBLE_DEVICES: 8 ranks on a 1-GPU node would share it
        (8, 1, "", False),  # an empty list hides every GPU
        (8, 8, "0,1,2,3,4,5,6,7", False),  # the node's GPUs, shared by its ranks
        (1, 1, "0", False),
    ],
)
def test_per_rank_gpu_isolation_is_recognised(local_world_size, count, visible, own):
    from mjrl.distributed.devices import ranks_have_own_devices

    assert ranks_have_own_devices(local_world_size, count, visible) is own


def _fake_cuda(monkeypatch, count: int, visible: str | None) -> None:
    """This machine has no GPU: fake the device count torch reports, and the launcher's
    CUDA_VISIBLE_DEVICES."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)


def test_resolve_device_uses_the_gpu_a_rank_was_given(monkeypatch):
    """Under SLURM --gpus-per-task=1 each of a node's 8 ranks sees one GPU: it must use it,
    not cuda:<LOCAL_RANK> (which does not exist there), and `--device cuda:0` means that GPU."""
    from mjrl.distributed.devices import check_node_devices, resolve_device
    from mjrl.errors import UsageError

    _fake_cuda(monkeypatch, count=1, visible="5")
    for spec in ("auto", "cuda", "cuda:0"):
        assert resolve_device(spec, local_rank=5, local_world_size=8) == torch.device("cuda", 0), spec
    _fake_cuda(monkeypatch, count=8, visible=None)  # torchrun on an 8-GPU node
    assert resolve_device("auto", local_rank=5, local_world_size=8) == torch.device("cuda", 5)
    with pytest.raises(UsageError, match="--device cuda:0 names one GPU"):
        resolve_device("cuda:0", local_rank=5, local_world_size=8)
    _fake_cuda(monkeypatch, count=1, visible=None)  # 2 ranks on a one-GPU node
    with pytest.raises(UsageError, match="2 processes per node but this node has 1 CUDA device"):
        resolve_device("cuda", local_rank=1, local_world_size=2)
    # mjrl's own launcher gives its workers the devices it sees: they share them, whatever
    # CUDA_VISIBLE_DEVICES says.
    _fake_cuda(monkeypatch, count=1, visible="0")
    with pytest.raises(UsageError, match="2 processes per node but this node has 1 CUDA device"):
        check_node_devices("auto", 2)
    check_node_devices("cuda:0", 1)
    _fake_cuda(monkeypatch, count=0, visible=None)
    assert resolve_device("auto", local_rank=1, local_world_size=2) == torch.device("cpu")
