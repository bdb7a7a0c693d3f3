"""The seams between layers: the runner drives PPO through the `Algorithm` interface alone, the
tools never import the runner, and the learner draws only from generators it owns."""

from __future__ import annotations

import ast
import dataclasses
import types
from pathlib import Path

import pytest
import torch
from conftest import DEVICE

import mjrl.runner
import mjrl.tools
from mjrl.distributed.context import single_process
from mjrl.envs import VecEnv
from mjrl.rl import make_algorithm
from mjrl.rl.algorithm import NonFiniteUpdate, rollout_step
from mjrl.rl.config import SacConfig
from mjrl.rl.ppo import PPO
from mjrl.tasks import load_task

TASK = load_task("Mjrl-Cartpole-Balance")
# What only PPO itself may use: its module, its update's statistics, normaliser and optimizer.
ALGORITHM_INTERNALS = (
    "mjrl.rl.ppo",
    "mjrl.rl.distillation",
    "mjrl.rl.statistics",
    "mjrl.rl.normalizer",
    "mjrl.rl.optim",
)
# The loop itself; play, evaluation, export, video and plots work on a trained policy.
LOOP_MODULES = (
    "runner", "state", "start", "job", "metrics", "outputs", "loggers", "run_dir", "faults", "hooks", "graphs",
    "config",
)  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return modules


def test_the_training_loop_imports_no_algorithm_internals():
    package = Path(mjrl.runner.__file__).parent
    checked = 0
    for name in LOOP_MODULES:
        found = imported_modules(package / f"{name}.py")
        leaks = sorted(m for m in found if m.startswith(ALGORITHM_INTERNALS))
        assert not leaks, f"runner/{name}.py imports {leaks}"
        checked += 1
    assert checked == len(LOOP_MODULES)
    assert "mjrl.rl.make_algorithm" in imported_modules(package / "start.py")  # built through the interface


def test_the_tools_import_neither_the_runner_nor_the_cli():
    """The runner uses the tools (evaluation, export, video); the reverse would be a cycle."""
    package = Path(mjrl.tools.__file__).parent
    modules = sorted(package.glob("*.py"))
    assert {m.stem for m in modules} >= {"evaluate", "export", "play", "plots", "trained", "video"}
    for module in modules:
        leaks = sorted(m for m in imported_modules(module) if m.startswith(("mjrl.runner", "mjrl.cli")))
        assert not leaks, f"tools/{module.name} imports {leaks}"


def one_iteration(seed: int, draw_from_global: bool, algo: str = "ppo") -> torch.Tensor:
    """Build the algorithm, collect a rollout and update, as the runner does; with
    `draw_from_global`, other code draws from torch's global generator (seeded differently)
    before the algorithm is built and at every step in between (`torch.manual_seed` reseeds the
    global generators of the GPUs too, so with MJRL_TEST_DEVICE=cuda those differ as well).
    SAC's critics are the algorithm's own networks, built beside the policy."""
    cfg = dataclasses.replace(TASK.env_cfg, num_envs=8)
    agent = TASK.agent_cfg.replace(num_steps_per_env=8, num_mini_batches=2)
    if algo == "sac":
        sac = SacConfig(batch_size=16, buffer_steps=8, learning_starts=2)
        agent = types.SimpleNamespace(algo="sac", algorithm=sac, policy=agent.policy, runner=agent.runner)
    env = VecEnv(cfg, TASK.build(cfg), torch.device(DEVICE), seed=seed)
    torch.manual_seed(seed if not draw_from_global else 999)
    torch.rand(10)
    steps = agent.runner.num_steps_per_env
    algorithm = make_algorithm(agent, env, steps, single_process(DEVICE), seed=seed)
    obs = env.obs
    for step in range(steps):
        if draw_from_global:
            torch.manual_seed(1000 + step)
            torch.rand(100)
        obs = rollout_step(env, algorithm, obs)
    algorithm.compute_returns(obs)
    algorithm.update()
    return torch.cat([p.detach().flatten() for p in algorithm.parameters()])


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_training_draws_nothing_from_torchs_global_generator(algo: str):
    quiet = one_iteration(seed=3, draw_from_global=False, algo=algo)
    assert torch.equal(quiet, one_iteration(seed=3, draw_from_global=True, algo=algo))
    assert not torch.equal(quiet, one_iteration(seed=4, draw_from_global=False, algo=algo))  # the seed does matter


def collected_ppo() -> PPO:
    """PPO on the cart-pole with one rollout collected (8 envs x 8 steps, 5 epochs of 2 minibatches)."""
    cfg = dataclasses.replace(TASK.env_cfg, num_envs=8)
    agent = TASK.agent_cfg.replace(num_steps_per_env=8, num_mini_batches=2)
    env = VecEnv(cfg, TASK.build(cfg), torch.device(DEVICE), seed=0)
    algorithm = make_algorithm(agent, env, 8, single_process(DEVICE), seed=0)
    obs = env.obs
    for _ in range(8):
        obs = rollout_step(env, algorithm, obs)
    algorithm.compute_returns(obs)
    return algorithm


def learning_state(ppo: PPO) -> list[torch.Tensor]:
    return [t.detach().clone() for t in [*ppo.parameters(), *ppo.optimizer.tensors(), ppo.optimizer.lr]]


def test_a_step_with_a_nonfinite_loss_is_skipped_on_the_device():
    """The skip is decided on the device (no host read per step): a step whose loss is not
    finite changes neither the weights, nor Adam's moments and step count, nor the learning
    rate; the others go on; too many in a row stop the run at the iteration's metrics."""
    ppo = collected_ppo()
    ppo.storage.actions[0, 0, 0] = float("nan")  # one sample: one minibatch of each epoch
    sums = ppo.update()
    assert sums["steps"].item() == 5  # of 10
    assert all(torch.isfinite(t).all() for t in learning_state(ppo))

    ppo = collected_ppo()
    before = learning_state(ppo)
    ppo.storage.actions.fill_(float("nan"))  # every minibatch
    sums = ppo.update()
    assert sums["steps"].item() == 0 and sums["mean_learning_rate"].item() == 0
    assert all(torch.equal(a, b) for a, b in zip(before, learning_state(ppo), strict=True))
    totals = {name: value.item() for name, value in {**sums, **ppo.log_values()}.items()}
    assert totals["consecutive_skips"] == 10
    with pytest.raises(NonFiniteUpdate, match="10 consecutive PPO updates had a non-finite loss"):
        ppo.update_metrics(totals)


def test_a_transition_holds_what_the_actions_were_chosen_for_and_what_followed():
    """The env rewrites its observation tensors in place at every step: the transition's `obs`
    is a copy taken before the step, not the env's tensors (which then hold `next_obs`)."""
    from mjrl.rl.algorithm import Transition

    cfg = dataclasses.replace(TASK.env_cfg, num_envs=8)
    env = VecEnv(cfg, TASK.build(cfg), torch.device(DEVICE), seed=0)
    algorithm = make_algorithm(TASK.agent_cfg.replace(num_mini_batches=2), env, 8, single_process(DEVICE), seed=0)
    seen: list[Transition] = []
    algorithm.process_env_step = seen.append  # what the loop hands the algorithm
    before = {group: value.clone() for group, value in env.obs.items()}
    next_obs = rollout_step(env, algorithm, env.obs)
    (transition,) = seen
    assert all(torch.equal(transition.obs[group], before[group]) for group in before)
    assert not torch.equal(transition.obs["actor"], transition.next_obs["actor"])
    assert transition.next_obs is next_obs and transition.final_obs.keys() == before.keys()
    assert transition.actions.shape == (8, env.num_actions) and transition.rewards.shape == (8,)
