"""The training loop replayed as CUDA graphs would replay it, on the CPU (`capture.py`): a
rollout and an update captured once and replayed for several iterations (resets, normaliser
updates, learning-rate changes, a skipped update, a resume in between) equal the eager run of
a twin with the same seed bit for bit, for every task."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch
import warp as wp
from capture import CaptureError, EmulatedGraph
from conftest import DEVICE

from mjrl.distributed.context import single_process
from mjrl.errors import UsageError
from mjrl.metrics_file import read_metrics
from mjrl.runner.config import TrainConfig
from mjrl.runner.faults import fault_hooks
from mjrl.runner.graphs import (
    CAPTURED,
    CAPTURED_WITH_RANKS,
    SEVERAL_RANKS,
    Graph,
    LoopGraphs,
    choose_graphs,
    loop_graphs,
    why_not_graphs,
)
from mjrl.runner.runner import Runner
from mjrl.runner.start import build_run
from mjrl.sim import TerrainConfig
from mjrl.tasks import load_task

SMALL_GRID = TerrainConfig(kind="grid", rows=3, columns_per_type=1, patch_size=4.0, platform=1.0, border=1.0)
ITERATIONS = 5


def build(
    task_name: str, log_root: Path, teacher: str | None, graphed: bool = False, algo: str = "ppo", **runner: object
) -> Runner:
    """A runner as `train` builds it (one process, its warm-up done), small: 8 envs x 8 steps."""
    task = load_task(task_name)
    defaults = TrainConfig.for_task(task, "distillation" if teacher else algo)
    algorithm = defaults.algorithm
    if teacher:
        algorithm = dataclasses.replace(algorithm, teacher=teacher, num_mini_batches=2)
    elif hasattr(algorithm, "num_mini_batches"):  # PPO's
        algorithm = dataclasses.replace(algorithm, num_mini_batches=2)
    else:  # the replay learner's: a batch stored after 4 of the 8 steps
        algorithm = dataclasses.replace(algorithm, batch_size=32, buffer_size=128)
    env_cfg = dataclasses.replace(task.env_cfg, num_envs=8, episode_length_s=1.0)
    if "Rough" in task_name:
        env_cfg = dataclasses.replace(env_cfg, terrain=SMALL_GRID)
    cfg = dataclasses.replace(
        defaults,
        env=env_cfg,
        runner=dataclasses.replace(defaults.runner, num_steps_per_env=8, **runner),
        algorithm=algorithm,
        device=DEVICE,
        logger="none",
        log_root=str(log_root),
    )
    if graphed and DEVICE != "cpu":  # with MJRL_TEST_DEVICE=cuda, the real CUDA graphs
        cfg = dataclasses.replace(cfg, runner=dataclasses.replace(cfg.runner, cuda_graphs="on"))
    runner = build_run(task, cfg, single_process(DEVICE))
    if graphed and DEVICE == "cpu":
        runner.graphs = LoopGraphs(lambda: EmulatedGraph([runner.env.sim]), runner.ctx)
    return runner


def state_of(runner: Runner) -> dict[str, torch.Tensor]:
    """What an iteration leaves: the rollout, the learned weights and rate, the statistics."""
    storage = runner.algorithm.storage
    fields = dict(storage.fields)
    learned = {f"parameter {k}": v for k, v in runner.algorithm.inference_policy().state_dict().items()}
    env = runner.env
    stats = {**env.pop_statistics(), "obs": env.obs["actor"]}
    return {k: v.detach().clone() for k, v in {**fields, **learned, **stats}.items()} | {
        "learning rate": runner.algorithm.optimizer.lr.clone()
    }


def between_iterations(runner: Runner, iteration: int) -> None:
    """Host work between an iteration's segments, the same in both twins."""
    if iteration == 3:  # a resume: every env starts afresh on its saved row, episodes window kept
        runner.env.load_resume_state(runner.env.resume_state())


def before_update(runner: Runner, iteration: int) -> None:
    if iteration == 4:  # one sample's action (the teacher's, distilling) not finite: its minibatches are skipped
        storage = runner.algorithm.storage
        (storage.actions if hasattr(storage, "actions") else storage.teacher_actions)[0, 0, 0] = float("nan")


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN where NaN (the skipped sample's action stays in the rollout)."""
    if not a.is_floating_point():
        return torch.equal(a, b)
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


TASKS = ["Mjrl-Cartpole-Balance", "Mjrl-Cartpole-Swingup", "Mjrl-Velocity-Flat-Quadruped",
         "Mjrl-Velocity-Rough-Quadruped", "Mjrl-Velocity-Flat-Humanoid",
         "Mjrl-Velocity-Flat-Quadruped-Student", "Mjrl-Cartpole-Balance-Positions"]  # fmt: skip
# On a GPU, two runs of a task with contacts differ from their first step, graphs or not:
# mujoco_warp orders contacts by an atomic counter, and its deterministic mode does not sort them
# yet (4.0.0; H100, 2026-11-27). The cart-poles, without contacts, are bit-identical there, so the
# real CUDA graphs are checked bit for bit on them; the emulation covers every task on the CPU.
GPU_EXACT_TASKS = [name for name in TASKS if "Cartpole" in name]


def graph_pair(runner: Runner) -> tuple[Graph, Graph]:
    """A rollout graph and an update graph: emulated on the CPU, real CUDA graphs on a GPU."""
    if DEVICE == "cpu":
        return EmulatedGraph([runner.env.sim]), EmulatedGraph([runner.env.sim])
    graphs = loop_graphs("on", runner.ctx, runner.env, [runner.env.generator, runner.algorithm.generator])
    return graphs.make_graph(), graphs.make_graph()


@pytest.mark.parametrize("task_name", TASKS if DEVICE == "cpu" else GPU_EXACT_TASKS)
def test_the_loop_replayed_as_graphs_equals_the_eager_loop(task_name, tmp_path, request):
    teacher = request.getfixturevalue("tiny_teacher") if task_name.endswith("Student") else None
    eager, graphed = (build(task_name, tmp_path / name, teacher) for name in ("eager", "graphed"))
    rollout, update = graph_pair(graphed)
    for iteration in range(ITERATIONS):
        for runner in (eager, graphed):
            between_iterations(runner, iteration)
        eager.collect()
        before_update(eager, iteration)
        eager.algorithm.update()
        if iteration == 0:  # a first iteration eagerly: whatever is made at a first use, made
            graphed.collect()
            before_update(graphed, iteration)
            graphed.algorithm.update()
        elif iteration == 1:
            rollout.capture(graphed.collect)
            before_update(graphed, iteration)
            update.capture(graphed.algorithm.update)
        else:
            rollout.replay()
            before_update(graphed, iteration)
            update.replay()
        expected, got = state_of(eager), state_of(graphed)
        differ = [name for name in expected if not bitwise_equal(expected[name], got[name])]
        assert not differ, f"iteration {iteration}: {differ}"


def test_the_runner_with_loop_graphs_logs_what_the_eager_runner_logs(tmp_path):
    """The runner's own segmenting (`--runner.cuda-graphs`) with the emulated graphs: its
    metrics and final weights equal the eager runner's, through a checkpoint, a fault's
    iteration (run eagerly, the graphs kept) and the iterations replayed after it."""
    runs = {}
    for graphed in (False, True):
        task_name = "Mjrl-Velocity-Flat-Quadruped" if DEVICE == "cpu" else GPU_EXACT_TASKS[0]
        runner = build(task_name, tmp_path / str(graphed), None, graphed, max_iterations=6, save_interval=3)
        runner.hooks = fault_hooks("nan@0:4", rank=0, restart_count=0)  # NaN actions in iteration 4
        summary = runner.run()
        if graphed:  # iterations 0 and 4 eager, 1 captured: 2, 3 and 5 replayed
            assert runner.graphs.replays == 2 * 3
        timings = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s", "eval/seconds"}
        runs[graphed] = [{k: v for k, v in row.items() if k not in timings} for row in read_metrics(runner.run_dir)]
        runs[graphed].append(summary["parameters_sha256"])
    assert runs[True][4]["nonfinite_resets"] > 0  # the fault's iteration did corrupt its actions
    assert runs[True] == runs[False]


def test_an_off_policy_learner_replayed_as_graphs_logs_what_it_logs_eagerly(tmp_path):
    """The replay learner (`replay_learner.py`) updates after every env step: the runner
    captures a one-step rollout segment and an update, and replays them 8 times an iteration;
    metrics and weights equal the eager runner's, through a checkpoint of its ring."""
    import replay_learner  # noqa: F401  (registers --algo replay-test)

    runs = {}
    for graphed in (False, True):
        runner = build("Mjrl-Cartpole-Balance", tmp_path / str(graphed), None, graphed, algo="replay-test",
                       max_iterations=4, save_interval=2)  # fmt: skip
        summary = runner.run()
        if graphed:  # iteration 0 eager, 1 captured (its first segment): 7 + 2 * 8 segment pairs replayed
            assert runner.graphs.replays == 2 * (7 + 2 * 8)
        lines = read_metrics(runner.run_dir)
        assert all(line["learning_s"] > 0 for line in lines)
        timings = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s", "eval/seconds"}
        runs[graphed] = [{k: v for k, v in line.items() if k not in timings} for line in lines]
        runs[graphed].append(summary["parameters_sha256"])
    assert [line["gradient_steps"] for line in runs[True][:-1]] == [5, 8, 8, 8]
    assert runs[True] == runs[False]


@pytest.mark.heavy
def test_compiled_code_runs_compiled_inside_the_emulated_capture(tmp_path):
    """`--runner.compile all` inside the emulated graphs, as inside real ones: each inductor
    graph (the env's step terms, the policy's act, PPO's losses and their backward) is recorded
    compiled, not replaced by the eager code, and the replayed run logs what its eager twin,
    compiled alike, logs, through a checkpoint."""
    runs, graphs = {}, []
    for graphed in (False, True):
        runner = build("Mjrl-Cartpole-Balance", tmp_path / str(graphed), None, graphed, compile="all",
                       max_iterations=4, save_interval=2)  # fmt: skip
        if graphed:
            runner.graphs.make_graph = lambda: graphs.append(EmulatedGraph([runner.env.sim])) or graphs[-1]  # noqa: B023
        summary = runner.run()
        lines = read_metrics(runner.run_dir)
        timings = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s"}
        runs[graphed] = [{k: v for k, v in line.items() if k not in timings} for line in lines]
        runs[graphed].append(summary["parameters_sha256"])
    # The rollout: some per step; the update: 5 epochs x 2 minibatches, forward and backward.
    rollout, update = (graph.compiled_calls for graph in graphs)
    assert rollout > 0 and rollout % 8 == 0 and update == 5 * 2 * 2
    assert runs[True] == runs[False]


def test_a_host_read_cannot_be_captured():
    with pytest.raises(CaptureError, match=r"Tensor\.item reads the device on the host"):
        EmulatedGraph([]).capture(lambda: torch.ones(2).sum().item())
    with pytest.raises(CaptureError, match="nonzero"):  # an operation that reads, by dispatch
        EmulatedGraph([]).capture(lambda: torch.nonzero(torch.ones(2)))


@pytest.mark.parametrize("read", ["tolist", "cpu", "numpy", "bool", "int"])
def test_a_host_read_by_any_route_cannot_be_captured(read):
    """On the CPU `tolist`, `numpy` and `cpu` dispatch no operation, yet on a GPU each is a
    blocking copy that a capture refuses: the emulator refuses them where Python calls them."""
    ones = torch.ones(2)
    reads = {"tolist": ones.tolist, "cpu": ones.cpu, "numpy": ones.numpy, "bool": lambda: bool(ones[0]),
             "int": lambda: int(ones[0])}  # fmt: skip
    with pytest.raises(CaptureError, match="reads the device on the host"):
        EmulatedGraph([]).capture(reads[read])


def test_a_rebound_state_and_a_reallocated_warp_array_are_caught(tmp_path):
    """What a CUDA graph cannot see: a tensor the captured code rebinds (its replay keeps
    writing the old one, so the twins differ), and a Warp array of the simulation reallocated
    after the capture (the graph holds its old address)."""
    runner = build("Mjrl-Cartpole-Balance", tmp_path, None)
    runner.collect()
    runner.algorithm.update()
    graph = EmulatedGraph([runner.env.sim])
    graph.capture(runner.collect)
    storage = runner.algorithm.storage
    rebound = storage.fields["rewards"] = storage.fields["rewards"].clone()  # rebinds a carried tensor
    rebound.fill_(7.0)
    storage.restart()  # the update's part: the rollout writes from its first row again
    graph.replay()
    assert torch.equal(rebound, torch.full_like(rebound, 7.0))  # the replay wrote the old one
    sim = runner.env.sim
    sim.data.qacc = wp.clone(sim.data.qacc)  # reallocated (a resized buffer, a rebuilt model)
    storage.restart()
    with pytest.raises(CaptureError, match=r"Warp arrays reallocated since the capture: \['sim0.data.qacc'\]"):
        graph.replay()


def test_a_tensor_made_from_python_data_cannot_be_captured():
    """On a GPU, `new_tensor(3.0)` copies from pageable host memory, which a capture refuses: the
    first real capture of the update failed so (H100, 2026-11-27); `new_full` fills on the device."""
    ones = torch.ones(2)
    with pytest.raises(CaptureError, match="lift_fresh"):
        EmulatedGraph([]).capture(lambda: ones.new_tensor(float(ones.numel())))
    assert EmulatedGraph([]).capture(lambda: ones.new_full((), float(ones.numel()))) == 2.0


def test_the_loop_is_captured_only_where_a_gpu_can_hold_it():
    """`--runner.cuda-graphs`: on where nothing stands against it; `auto` falls back with the
    reason in one line, `on` refuses with it (the CPU's case: tests/test_bad_input.py)."""
    gpu = torch.device("cuda", 0)
    assert why_not_graphs(gpu, True, False) is None
    assert choose_graphs("auto", None) == (True, CAPTURED)
    assert choose_graphs("on", None) == (True, CAPTURED)
    assert choose_graphs("off", None) == (False, None)
    for why_not in (why_not_graphs(gpu, False, False), why_not_graphs(gpu, True, True)):
        assert why_not is not None
        assert choose_graphs("auto", why_not) == (False, f"cuda graphs: off ({why_not})")
        with pytest.raises(UsageError, match=re.escape(f"--runner.cuda-graphs on: {why_not}")):
            choose_graphs("on", why_not)
    assert "deterministic" in why_not_graphs(gpu, True, True)
    # Several ranks: `auto` stays eager, `on` captures their collectives and says how far that is proven.
    assert choose_graphs("auto", None, several_ranks=True) == (False, f"cuda graphs: off ({SEVERAL_RANKS})")
    assert choose_graphs("on", None, several_ranks=True) == (True, CAPTURED_WITH_RANKS)
    assert "CPU emulator only" in CAPTURED_WITH_RANKS
