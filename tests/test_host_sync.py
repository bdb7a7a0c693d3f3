"""The env step never waits on the device: no host reads (`.item()`, `bool(tensor)`, `nonzero`)
and no tensors built from host data (Python lists or tuples as indices, `torch.tensor(...)`).
On a GPU each of these is a blocking copy; on the CPU they are invisible, so a dispatch mode
records every tensor operation of real env steps and the test names the offending lines. With
MJRL_TEST_DEVICE=cuda the env runs on the GPU, and torch's sync debug mode also turns every
synchronising torch call of those steps into an error (a copy to or from the host that the
list of operations below misses, such as `.to(device)` of a tensor built on the CPU)."""

from __future__ import annotations

import collections
import dataclasses
import math
import traceback

import pytest
import torch
from capture import HOST_READ_METHODS
from conftest import DEVICE, TINY_RUN, run_main
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from mjrl.envs import VecEnv
from mjrl.rl.algorithm import rollout_step
from mjrl.runner.config import TrainConfig
from mjrl.sim import TerrainConfig
from mjrl.tasks import load_task

# Operations that read device data on the host or copy host data to the device.
HOST_SYNC_OPS = {
    "aten.lift_fresh.default",  # torch.tensor(list), x[:, (1, 2)]: host data copied in
    "aten._local_scalar_dense.default",  # .item(), bool(t), float(t), int(t)
    "aten.nonzero.default",  # output size depends on the data
    "aten.masked_select.default",
    "aten.is_nonzero.default",
    "aten.equal.default",
}


class HostSyncRecorder(TorchDispatchMode):
    """Every offending op, with the innermost mjrl frame that issued it."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) in HOST_SYNC_OPS:
            frames = [f for f in traceback.extract_stack() if "mjrl" in f.filename and "test_" not in f.filename]
            where = f"{frames[-1].filename.split('mjrl')[-1]}:{frames[-1].lineno} {frames[-1].line}" if frames else "?"
            self.found.append(f"{func} at {where}")
        return func(*args, **(kwargs or {}))


def env_for(task_name: str, num_envs: int = 4, **changes) -> VecEnv:
    task = load_task(task_name)
    cfg = dataclasses.replace(task.env_cfg, num_envs=num_envs, **changes)
    return VecEnv(cfg, task.build(cfg), torch.device(DEVICE), seed=0)


TASKS = ["Mjrl-Cartpole-Balance", "Mjrl-Cartpole-Swingup", "Mjrl-Velocity-Flat-Quadruped"]


@pytest.mark.parametrize("task_name", [*TASKS, "Mjrl-Tracking-Flat-Humanoid"])
def test_env_step_does_not_wait_on_the_device(task_name):
    env = env_for(task_name)
    # Some envs end during the recorded steps (terminations and time-outs), so resets, final
    # observations and episode statistics are recorded too.
    env.episode_length[:2] = env.max_episode_length - 3
    must_end = 2
    if "Quadruped" in task_name:  # the cart-poles have time-outs only
        env.sim.qpos[2, 3:7] = torch.tensor([0.0, 1.0, 0.0, 0.0], device=env.device)  # upside down: ends at once
        must_end = 3
    # The actions are drawn and moved to the env's device before recording: the copy to a GPU
    # is the test's, not the step's.
    generator = torch.Generator().manual_seed(0)
    actions = [torch.randn(env.num_envs, env.num_actions, generator=generator).to(env.device) for _ in range(6)]
    recorder = HostSyncRecorder()
    ended = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    on_gpu = env.device.type == "cuda"
    if on_gpu:  # a synchronising torch call in the recorded steps raises
        mode_before = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
    try:
        with recorder:
            for step_actions in actions:
                _, _, terminated, truncated, _ = env.step(step_actions)
                ended |= terminated | truncated
    finally:
        if on_gpu:
            torch.cuda.set_sync_debug_mode(mode_before)
    assert ended[:must_end].all(), "the recorded steps must include resets"
    assert not recorder.found, "\n".join(sorted(set(recorder.found)))
    assert math.isfinite(float(env.obs["actor"].sum()))


def carried_state(env: VecEnv, extra: dict[str, object] | None = None) -> dict[str, object]:
    """What the env (and the `extra` objects) keep between steps, by name: each tensor's storage
    (where it lives), and each Python number or flag as it is."""
    found: dict[str, object] = {}
    holders = {"env": env, "env.terrain": env.terrain, "env.state": env.state, "env.sim": env.sim}
    holders["env.obs_builder"] = env.obs_builder  # the observations' histories
    holders |= {f"env.components[{name}]": component for name, component in env.components.items()}
    holders |= extra or {}
    for prefix, holder in holders.items():
        for name, value in (vars(holder) if holder is not None else {}).items():
            if isinstance(value, dict):
                items = value.items()
            elif isinstance(value, list | tuple):
                items = enumerate(value)
            else:
                items = [(None, value)]
            for key, item in items:
                path = f"{prefix}.{name}" + ("" if key is None else f"[{key!r}]")
                if isinstance(item, torch.Tensor):
                    found[path] = item.untyped_storage().data_ptr()
                elif isinstance(item, bool | int | float):
                    found[path] = item
    return found


# A small grid of 3 rows, so that envs that walk off their patch go up a row and others down.
SMALL_GRID = TerrainConfig(kind="grid", rows=3, columns_per_type=1, patch_size=4.0, platform=1.0, border=1.0)


TASKS_WITH_STATE = [
    *TASKS,
    "Mjrl-Velocity-Rough-Quadruped",
    "Mjrl-Velocity-Flat-Humanoid",
    "Mjrl-Tracking-Flat-Humanoid",
]


@pytest.mark.parametrize("task_name", TASKS_WITH_STATE)
def test_the_env_writes_what_it_carries_between_steps_in_place(task_name):
    """A CUDA graph captured around an env step reads and writes the memory it saw at capture:
    a tensor the step rebinds to a new one (the observations, the terrain rows) would keep its
    capture-time contents at every replay, and a Python counter the step increments would stay
    as captured. So through steps, resets, the curriculum's moves and a resume, every tensor
    the env carries keeps its storage and every Python number its value."""
    changes = {"terrain": SMALL_GRID, "random_initial_episode_length": False} if "Rough" in task_name else {}
    env = env_for(task_name, num_envs=6, **changes)
    generator = torch.Generator().manual_seed(0)

    def steps(count: int) -> None:
        for _ in range(count):
            env.step(torch.randn(env.num_envs, env.num_actions, generator=generator).to(env.device))

    steps(1)  # terms make what they keep at their first call
    before = carried_state(env)
    levels = env.terrain.level.clone() if env.terrain is not None else None
    for _ in range(2):
        env.episode_length[:3] = env.max_episode_length - 1  # time-outs: resets, episode ends
        if env.terrain is not None:  # far from their patches' centres: promoted at the time-out
            env.sim.qpos[:3, 0] += SMALL_GRID.patch_size * 0.6
        steps(3)
    env.pop_term_stats()
    env.load_resume_state(env.resume_state())
    steps(2)
    after = carried_state(env)
    changed = [path for path in before if after.get(path) != before[path]]
    assert not changed, f"rebound or changed outside a tensor: {changed}"
    if levels is not None:  # the curriculum moved some env, in place
        assert not torch.equal(env.terrain.level, levels)


# Tensor methods that read a tensor's data on the host: a blocking copy on a GPU.
HOST_READS = {*HOST_READ_METHODS, "nonzero", "equal"}


class HostReadCounter(TorchFunctionMode):
    """Every host read of tensor data, counted by the innermost mjrl line that made it. On the
    CPU a read costs nothing and dispatches no operation (`tolist`), so the calls are counted
    where Python makes them, on every device alike."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READS:
            frames = [f for f in traceback.extract_stack() if "/mjrl/" in f.filename and "/tests/" not in f.filename]
            self.reads[f"{frames[-1].filename.split('/mjrl/')[-1]}:{frames[-1].lineno}" if frames else "?"] += 1
        return func(*args, **(kwargs or {}))


def reads_of_a_run(*args: str) -> collections.Counter[str]:
    counter = HostReadCounter()
    with counter:
        result = run_main("train", *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return counter.reads


@pytest.mark.parametrize("setup", ["ppo", "ppo-rollout-sync-symmetry", "distillation", "replay-test"])
def test_a_training_iteration_reads_the_device_once(setup, tmp_path, request):
    """Each iteration reads the device on the host once: its metrics' gather. Everything else
    (the KL that adapts the learning rate, a non-finite step's skip, the advantages' moments,
    the logged learning rate) is decided and kept on the device, so that the host can queue a
    whole iteration ahead, or replay it as a graph. Counted as the difference between runs of
    2 and 3 iterations (start-up, the final checkpoint and the summary are the same in both)."""
    task, extra = "Mjrl-Cartpole-Balance", []
    if setup == "ppo-rollout-sync-symmetry":
        extra = ["--algorithm.sync", "rollout", "--algorithm.symmetry.augment", "True"]
    if setup == "replay-test":  # an off-policy learner updating after every env step (tests/replay_learner.py)
        import replay_learner  # noqa: F401  (registers it)

        extra = ["--algo", "replay-test", "--algorithm.batch-size", "64"]
    if setup == "distillation":
        task, extra = (
            "Mjrl-Velocity-Flat-Quadruped-Student",
            ["--algo", "distillation", "--algorithm.teacher", request.getfixturevalue("tiny_teacher")],
        )
    tiny = TINY_RUN[:-2] if setup == "replay-test" else TINY_RUN  # without PPO's minibatches
    common = [task, *tiny, *extra, "--runner.eval-interval", "0", "--runner.save-interval", "1000"]
    runs = {n: reads_of_a_run(*common, "--runner.max-iterations", str(n), "--log-root", str(tmp_path / str(n)))
            for n in (2, 3)}  # fmt: skip
    per_iteration = {line: count for line, count in (runs[3] - runs[2]).items() if count}
    assert per_iteration == {next(iter(per_iteration), "?"): 1}, per_iteration
    assert next(iter(per_iteration)).startswith("distributed/packing.py"), per_iteration


@pytest.mark.parametrize("algorithm", ["ppo", "distillation"])
def test_the_rollout_storage_keeps_its_step_on_the_device(algorithm, request):
    """The step a rollout storage writes next is a tensor written in place: a Python counter
    would stay as captured, and every replayed env step would write the same row."""
    from mjrl.distributed.context import single_process
    from mjrl.rl import make_algorithm

    task = load_task("Mjrl-Cartpole-Balance" if algorithm == "ppo" else "Mjrl-Velocity-Flat-Quadruped-Student")
    agent = TrainConfig.for_task(task, algorithm)
    settings = {"num_mini_batches": 2}
    if algorithm == "distillation":
        settings["teacher"] = request.getfixturevalue("tiny_teacher")
    agent = dataclasses.replace(agent, algorithm=dataclasses.replace(agent.algorithm, **settings))
    env = env_for(task.name, num_envs=4)
    learner = make_algorithm(agent, env, 4, single_process(DEVICE), seed=0)
    obs = env.obs
    rows = []
    for step in range(4):
        before = carried_state(env, {"storage": learner.storage})
        obs = rollout_step(env, learner, obs)
        assert carried_state(env, {"storage": learner.storage}) == before, step
        rows.append(obs["actor"].clone())
    stored = learner.storage.actor_obs if algorithm == "ppo" else learner.storage.student_obs
    assert torch.equal(stored[1:], torch.stack(rows[:-1]))  # each step wrote its own row
    learner.update()
    assert learner.storage.step.tolist() == [0]
