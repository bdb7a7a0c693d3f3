"""`--policy.precision`: what each setting changes in the networks' arithmetic, and what it leaves alone."""

from __future__ import annotations

import dataclasses

import torch

from mjrl.distributed.context import single_process
from mjrl.obs_spec import flat_spec
from mjrl.rl import make_algorithm
from mjrl.rl.algorithm import Transition
from mjrl.rl.config import AgentConfig, PolicyConfig
from mjrl.rl.networks import build_actor_critic, matmul_precision

CPU = torch.device("cpu")


def policy(precision: str):
    torch.manual_seed(0)  # the same weights at every precision
    return build_actor_critic({"actor": 8, "critic": 9}, 3, PolicyConfig(precision=precision), CPU)


def test_bf16_runs_the_products_in_bfloat16_and_hands_back_float32() -> None:
    fp32, bf16 = policy("fp32"), policy("bf16")
    actor_obs, critic_obs = torch.randn(256, 8), torch.randn(256, 9)
    exact, rounded = fp32.mean_action(actor_obs), bf16.mean_action(actor_obs)
    assert rounded.dtype == torch.float32 and bf16.value(critic_obs).dtype == torch.float32
    # bfloat16 keeps 8 significant bits: the outputs move, by about that much and no more.
    assert not torch.equal(exact, rounded)
    assert (exact - rounded).abs().max() < 0.03 * exact.abs().max()
    assert (fp32.value(critic_obs) - bf16.value(critic_obs)).abs().max() < 0.03 * fp32.value(critic_obs).abs().max()
    # Deployment (play, export, evaluation) stays float32 whatever the training precision.
    assert torch.equal(bf16.act_deterministic(actor_obs), fp32.act_deterministic(actor_obs))


def test_tf32_is_switched_on_for_the_passes_only_and_is_fp32_on_the_cpu() -> None:
    before = torch.backends.cuda.matmul.fp32_precision
    with matmul_precision("tf32", torch.device("cuda")):
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    assert torch.backends.cuda.matmul.fp32_precision == before  # the env's products stay exact
    obs = torch.randn(64, 8)
    assert torch.equal(policy("tf32").mean_action(obs), policy("fp32").mean_action(obs))


@dataclasses.dataclass
class Shapes:
    """What a learner is built from (`mjrl.rl.algorithm.EnvInfo`), with no env behind it."""

    num_envs: int = 64
    num_actions: int = 3
    obs_spec: dict = dataclasses.field(default_factory=lambda: flat_spec({"actor": 8, "critic": 9}))
    obs_dims: dict = dataclasses.field(default_factory=lambda: {"actor": 8, "critic": 9})
    obs_std_floors: dict = dataclasses.field(default_factory=lambda: {"actor": None, "critic": None})
    mirrors: None = None
    mirror_problem: None = None


def parameter_change_of_one_update(precision: str) -> torch.Tensor:
    steps = 8
    agent = AgentConfig().replace(precision=precision, num_steps_per_env=steps, schedule="fixed")
    algorithm = make_algorithm(agent, Shapes(), steps, single_process("cpu"), seed=0)
    data = torch.Generator().manual_seed(1)
    for _ in range(steps):
        obs = {"actor": torch.randn(64, 8, generator=data), "critic": torch.randn(64, 9, generator=data)}
        actions = algorithm.act(obs)
        dones = torch.rand(64, generator=data) < 0.05
        rewards = torch.randn(64, generator=data)
        algorithm.process_env_step(Transition(obs, actions, rewards, dones, torch.zeros_like(dones), obs, obs))
    algorithm.compute_returns(obs)
    before = torch.cat([p.detach().flatten() for p in algorithm.parameters()])
    sums = algorithm.update()
    assert float(sums["steps"]) == 20  # no step was skipped for a non-finite value
    after = torch.cat([p.detach().flatten() for p in algorithm.parameters()])
    assert all(p.dtype == torch.float32 for p in algorithm.parameters())  # the weights stay float32
    return after - before


def test_a_bf16_update_takes_the_step_fp32_takes_within_rounding() -> None:
    exact, rounded = parameter_change_of_one_update("fp32"), parameter_change_of_one_update("bf16")
    assert not torch.equal(exact, rounded)
    cosine = torch.nn.functional.cosine_similarity(exact, rounded, dim=0)
    assert cosine > 0.95, f"bf16's update points elsewhere (cosine {cosine:.3f} with fp32's)"
    assert abs(rounded.norm() / exact.norm() - 1) < 0.1
