"""GAE, PPO losses, KL and the normaliser against hand-computed values and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mjrl.rl.networks import ActorCritic, DeployedActor, DiagonalGaussian
from mjrl.rl.normalizer import RunningNormalizer, moment_sums, update_from_sums
from mjrl.rl.ppo import gaussian_kl, surrogate_loss, value_loss
from mjrl.rl.storage import compute_gae


def test_gae_matches_hand_computation_with_episode_boundary():
    gamma, lam = 0.9, 0.8
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    values = torch.tensor([[0.5], [1.0], [1.5]])
    dones = torch.tensor([[0.0], [1.0], [0.0]])  # episode ends after step 1
    last_values = torch.tensor([2.0])
    adv, ret = compute_gae(rewards, values, dones, last_values, gamma, lam)
    d2 = 3.0 + 0.9 * 2.0 - 1.5  # bootstraps from last_values
    d1 = 2.0 - 1.0  # done: no bootstrap from step 2
    d0 = 1.0 + 0.9 * 1.0 - 0.5
    a2, a1 = d2, d1
    a0 = d0 + gamma * lam * a1
    assert torch.allclose(adv.flatten(), torch.tensor([a0, a1, a2]))
    assert torch.allclose(ret, adv + values)


def test_surrogate_loss_clips_large_ratios():
    adv = torch.tensor([1.0, -1.0])
    ratio = torch.tensor([2.0, 2.0])
    # positive advantage: min(2*1, 1.2*1) = 1.2; negative: min(-2, -1.2) = -2
    loss = surrogate_loss(ratio, adv, clip=0.2)
    assert math.isclose(loss.item(), -(1.2 - 2.0) / 2, rel_tol=1e-6)


def test_value_loss_takes_pessimum_of_clipped_prediction():
    returns = torch.tensor([1.0])
    old = torch.tensor([0.0])
    new = torch.tensor([0.9])  # clipped to 0.2 -> error 0.8^2 = 0.64 > 0.1^2
    assert math.isclose(value_loss(new, old, returns, clip=0.2).item(), 0.64, rel_tol=1e-6)
    assert math.isclose(value_loss(new, old, returns, clip=0.0).item(), 0.01, rel_tol=1e-5)


def test_gaussian_kl_and_log_prob_match_closed_form():
    mu0, s0, mu1, s1 = 0.3, 0.5, -0.2, 0.8
    expected = math.log(s1 / s0) + (s0**2 + (mu0 - mu1) ** 2) / (2 * s1**2) - 0.5
    kl = gaussian_kl(
        torch.tensor([[mu0, mu0]]), torch.tensor([[s0, s0]]), torch.tensor([[mu1, mu1]]), torch.tensor([[s1, s1]])
    )
    assert math.isclose(kl.item(), 2 * expected, rel_tol=1e-5)
    dist = DiagonalGaussian(torch.tensor([[mu0]]), torch.log(torch.tensor([s0])))
    x = torch.tensor([[0.1]])
    normal = torch.distributions.Normal(mu0, s0)
    assert math.isclose(dist.log_prob(x).item(), normal.log_prob(x).item(), rel_tol=1e-5)
    assert math.isclose(dist.entropy().item(), normal.entropy().item(), rel_tol=1e-5)


def test_normalizer_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    data = rng.normal(loc=[3.0, -2.0, 0.0], scale=[0.1, 5.0, 1.0], size=(1000, 3))
    norm = RunningNormalizer(3)
    for chunk in np.array_split(data, 7):
        update_from_sums(norm, moment_sums(torch.tensor(chunk)))
    assert norm.mean.dtype == torch.float64
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-10)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-10)
    out = norm(torch.tensor(data[:5], dtype=torch.float32)).numpy()
    np.testing.assert_allclose(out, (data[:5] - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), rtol=1e-4)


def test_std_offset_bounds_the_scaling_of_features_without_spread_and_is_exported():
    """With `obs_std_offset`, a feature is divided by its std plus the offset: one with almost no
    spread is no longer scaled up to unit variance. The exported actor divides alike."""
    rng = np.random.default_rng(2)
    data = rng.normal(loc=[0.0, 0.5], scale=[1e-3, 2.0], size=(500, 2))
    policy = ActorCritic(2, 2, 1, (8,), (8,), "elu", 1.0, normalize=True, obs_std_offset=0.01)
    update_from_sums(policy.actor_normalizer, moment_sums(torch.tensor(data)))
    x = torch.tensor(data[:50], dtype=torch.float32)
    expected = (data[:50] - data.mean(0)) / (np.sqrt(data.var(0) + 1e-8) + 0.01)
    np.testing.assert_allclose(policy.normalize_actor(x).numpy(), expected, rtol=1e-4, atol=1e-6)
    assert policy.normalize_actor(x)[:, 0].std() < 0.2  # without the offset: 1
    with torch.no_grad():
        assert torch.allclose(DeployedActor(policy)(x), policy.act_deterministic(x), atol=1e-6)


def test_a_std_floor_keeps_a_noise_only_feature_small_is_exported_and_saved():
    """A column with a floor is divided by max(std, floor): noise of std 0.05 under a floor of
    0.2 stays at a quarter of unit variance; a column that spreads more than its floor is scaled
    by its own std."""
    rng = np.random.default_rng(3)
    data = rng.normal(loc=[0.3, 0.3, 1.0], scale=[0.05, 0.5, 0.05], size=(2000, 3))
    floor = torch.tensor([0.2, 0.2, 0.0])
    policy = ActorCritic(3, 3, 1, (8,), (8,), "elu", 1.0, normalize=True, actor_std_floor=floor)
    update_from_sums(policy.actor_normalizer, moment_sums(torch.tensor(data)))
    x = torch.tensor(data, dtype=torch.float32)
    spread = policy.normalize_actor(x).std(dim=0)
    assert abs(spread[0] - 0.25) < 0.02 and abs(spread[1] - 1.0) < 0.02 and abs(spread[2] - 1.0) < 0.02
    with torch.no_grad():
        assert torch.allclose(DeployedActor(policy)(x), policy.act_deterministic(x), atol=1e-6)
    # Saved with the statistics: a policy built without it takes the checkpoint's floor...
    plain = ActorCritic(3, 3, 1, (8,), (8,), "elu", 1.0, normalize=True)
    plain.load_state_dict(policy.state_dict())
    assert torch.equal(plain.normalize_actor(x), policy.normalize_actor(x))
    # ...and a checkpoint written before floors were saved keeps the task's.
    old = {k: v for k, v in plain.state_dict().items() if not k.endswith("std_floor")}
    again = ActorCritic(3, 3, 1, (8,), (8,), "elu", 1.0, normalize=True, actor_std_floor=floor)
    again.load_state_dict(old)
    assert torch.equal(again.actor_normalizer.std_floor, floor.double())


def test_the_scale_is_rewritten_in_place_when_the_statistics_change():
    """A CUDA graph captured around `act` reads the scale tensors it saw at capture: an update,
    a load or a reset of the statistics must rewrite those tensors, not make new ones (before,
    the replayed actions after an update used the old scale)."""
    norm = RunningNormalizer(3, std_floor=torch.tensor([0.0, 0.5, 0.0]))
    x = torch.randn(64, 3, generator=torch.Generator().manual_seed(0)) * 3 + 1
    captured = norm._scale(torch.float32)  # what a capture of `act` would read
    changes = (
        lambda: update_from_sums(norm, moment_sums(x)),
        lambda: norm.load_state_dict({**norm.state_dict(), "mean": torch.full((3,), 2.0, dtype=torch.float64)}),
        norm.reset,
    )
    for change in changes:
        change()
        norm(x)  # the next `act`'s normalisation remakes the scale
        assert torch.equal(captured[0], norm.mean.float())
        assert torch.equal(captured[1], 1.0 / norm.std())
        assert norm._scale(torch.float32)[0] is captured[0]


def test_summed_moments_of_two_batches_give_the_statistics_of_the_pooled_data():
    """What pooling over ranks relies on: adding the batches' moment sums (one all-reduce)."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(100, 2)), rng.normal(3.0, 2.0, size=(37, 2))
    pooled = RunningNormalizer(2)
    update_from_sums(pooled, moment_sums(torch.tensor(a)) + moment_sums(torch.tensor(b)))
    data = np.concatenate([a, b])
    np.testing.assert_allclose(pooled.mean.numpy(), data.mean(0), rtol=1e-12)
    np.testing.assert_allclose(pooled.var.numpy(), data.var(0), rtol=1e-10)


def test_adam_matches_torch_adam():
    from mjrl.rl.optim import Adam

    torch.manual_seed(0)
    ours = torch.nn.Linear(4, 3)
    theirs = torch.nn.Linear(4, 3)
    theirs.load_state_dict(ours.state_dict())
    opt_ours = Adam(ours.parameters(), lr=3e-3)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=3e-3, foreach=False)
    for step in range(20):
        x = torch.randn(16, 4, generator=torch.Generator().manual_seed(step))
        for net, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            (net(x) ** 2).mean().backward()
            opt.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert opt_ours.state[next(ours.parameters())]["step"].item() == 20


def test_actor_and_critic_gradients_are_clipped_separately():
    """A huge value-loss gradient is clipped on its own and leaves the policy's gradient whole."""
    from mjrl.distributed.context import DistContext
    from mjrl.rl.config import PpoConfig
    from mjrl.rl.networks import ActorCritic
    from mjrl.rl.ppo import PPO

    policy = ActorCritic(3, 4, 2, (8,), (8,), "elu", 1.0, normalize=False)
    cfg = PpoConfig(max_grad_norm=1.0, clip_networks_separately=True)
    ppo = PPO(policy, cfg, DistContext(device=torch.device("cpu")), num_envs=1, num_steps=1)
    for p in policy.parameters():
        p.grad.fill_(1.0)  # in place: the gradients are views into PPO's flat buffer
    actor = [*policy.actor.parameters(), policy.log_std]
    scale = 0.5 / torch.cat([p.grad.flatten() for p in actor]).norm()
    for p in actor:
        p.grad *= scale  # actor norm 0.5: under the clip
    for p in policy.critic.parameters():
        p.grad *= 1e4  # critic norm far over it
    ppo.clip_gradients()

    def norm(params) -> float:
        return torch.cat([p.grad.flatten() for p in params]).norm().item()

    assert math.isclose(norm(actor), 0.5, rel_tol=1e-5)
    assert math.isclose(norm(policy.critic.parameters()), 1.0, rel_tol=1e-5)

    # The global clip scales both together, down to a norm of 1 in all.
    cfg = PpoConfig(max_grad_norm=1.0, clip_networks_separately=False)
    ppo = PPO(policy, cfg, DistContext(device=torch.device("cpu")), num_envs=1, num_steps=1)
    for p in policy.parameters():
        p.grad.fill_(1.0)
    for p in policy.critic.parameters():
        p.grad *= 1e4
    ppo.clip_gradients()
    assert math.isclose(norm([*actor, *policy.critic.parameters()]), 1.0, rel_tol=1e-5)
    assert norm(actor) < 1e-3


def test_a_rollout_refuses_a_field_its_own_attributes_would_hide():
    from mjrl.rl.storage import Field, Rollout

    rollout = Rollout(2, 3, {"rewards": Field(), "actions": Field((2,))}, torch.device("cpu"))
    rollout.store(rewards=torch.ones(3), actions=torch.ones(3, 2))
    rollout.next_step()
    assert rollout.rewards.shape == (2, 3) and rollout.flat("actions").shape == (6, 2)
    assert rollout.rewards[0].tolist() == [1.0, 1.0, 1.0] and int(rollout.step) == 1
    with pytest.raises(AttributeError, match="stores no field 'values'"):
        rollout.values  # noqa: B018
    with pytest.raises(ValueError, match=r"\['step', 'store'\]"):
        Rollout(2, 3, {"step": Field(), "store": Field()}, torch.device("cpu"))
