"""Feed mjrl's PPO and rsl_rl's PPO the identical rollout and compare their updates number by number.

rsl_rl is not a dependency of mjrl: run this with the reference venv (see rsl_rl_reference.py):

    /work/refvenv/bin/python scripts/compare_update.py --seed 1 --num-envs 64

What it does, on one Mjrl-Cartpole-Balance env:

1. builds mjrl's PPO (`make_algorithm`, with `noise_std_type="scalar"`, rsl_rl's parametrisation)
   and rsl_rl's PPO (`rsl_rl_config`), runs mjrl's normaliser warm-up as the runner does, and
   copies mjrl's weights, action std and normaliser statistics into rsl_rl's modules;
2. collects one rollout with actions sampled by mjrl and passes every step through both
   algorithms' own `act` / `process_env_step` (rsl_rl's sampled action replaced by mjrl's), so
   each stores its own values, log-probs and time-out bootstrap; the stored data are compared,
   then rsl_rl's storage is overwritten with mjrl's so that only the update differs;
3. compares returns, advantages, losses, gradients, learning rate, KL, normaliser statistics
   and parameters, first with 1 epoch x 1 minibatch, then with the task's 5 x 4 where both are
   given the same permutation (for `--iterations` iterations, everything carried over), and, for
   scale, with mjrl drawing a fresh permutation every epoch as it does in training.
   `--exact-advantages` gives rsl_rl mjrl's advantage normalisation (population std instead of
   torch.std's n - 1), the one difference found inside the update.

Result (seed 1, 64 envs): on the same rollout the two updates agree to float32 rounding in every
quantity (gradients <= 1e-5, parameters after a 5 x 4 update <= 5e-6); over iterations the
rounding differences grow through PPO's clip boundary and Adam (0 -> 10 flipped clip decisions
per minibatch by the third iteration), with or without `--exact-advantages`.

Nothing in mjrl or rsl_rl is changed; their functions are wrapped to record what they compute.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from pathlib import Path

import torch
from rsl_rl.algorithms import PPO as RslPPO
from tensordict import TensorDict
from torch import nn

import mjrl.rl.ppo as mjrl_ppo
from mjrl.distributed.context import single_process
from mjrl.envs import VecEnv
from mjrl.rl import make_algorithm
from mjrl.tasks import load_task

sys.path.insert(0, str(Path(__file__).parent))
from rsl_rl_reference import MjrlAsRslEnv, rsl_rl_config

TASK = "Mjrl-Cartpole-Balance"


def maxdiff(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = torch.as_tensor(a).double().reshape(-1), torch.as_tensor(b).double().reshape(-1)
    return (a - b).abs().max().item() if a.numel() else 0.0


def row(label: str, a, b, scale: bool = True) -> None:
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    extra = f"  (max |mjrl| {a.abs().max().item():.3e})" if scale else ""
    print(f"  {label:<44s} max|diff| {maxdiff(a, b):.3e}{extra}")


# --------------------------------------------------------------------------- building


def linears(seq: nn.Module) -> list[nn.Linear]:
    return [m for m in seq if isinstance(m, nn.Linear)]


def param_pairs(mj, rsl) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, mjrl parameter, rsl_rl parameter), layers matched by order."""
    pairs = []
    for net, mj_seq, rsl_seq in (
        ("actor", mj.policy.actor, rsl.actor.mlp),
        ("critic", mj.policy.critic, rsl.critic.mlp),
    ):
        for i, (a, b) in enumerate(zip(linears(mj_seq), linears(rsl_seq), strict=True)):
            pairs.append((f"{net}.linear{i}.weight", a.weight, b.weight))
            pairs.append((f"{net}.linear{i}.bias", a.bias, b.bias))
    pairs.append(("std", mj.policy.std, rsl.actor.distribution.std_param))
    return pairs


def copy_normalizer(mjn, rsln) -> None:
    """rsl_rl divides by sqrt(var) + eps (eps 0.01); mjrl by sqrt(var + 1e-8) + std_offset. Its
    _std is set to sqrt(var + 1e-8) so that both divide by the same number."""
    assert rsln.eps == mjn.std_offset, (rsln.eps, mjn.std_offset)
    rsln._mean.copy_(mjn.mean.float().unsqueeze(0))
    rsln._var.copy_(mjn.var.float().unsqueeze(0))
    rsln._std.copy_(torch.sqrt(mjn.var + mjn.eps).float().unsqueeze(0))
    rsln.count.fill_(int(mjn.count.item()))


def build(seed: int, num_envs: int, epochs: int, minibatches: int, forced_timeouts: int):
    task = load_task(TASK)
    env_cfg = dataclasses.replace(task.env_cfg, num_envs=num_envs)
    env = VecEnv(env_cfg, task.build(env_cfg), torch.device("cpu"), seed=seed)
    agent = task.agent_cfg.replace(noise_std_type="scalar", num_learning_epochs=epochs, num_mini_batches=minibatches)
    steps = agent.runner.num_steps_per_env
    mj = make_algorithm(agent, env, steps, single_process("cpu"), seed)
    # The runner's warm-up (PpoConfig.warm_up_normalizers is on for Balance).
    mj.warm_up(env.obs, lambda a: env.step(a)[0], steps if agent.algorithm.warm_up_normalizers else 0)
    torch.manual_seed(seed)
    rsl_env = MjrlAsRslEnv(env)
    with contextlib.redirect_stdout(None):  # construct_algorithm prints the models
        rsl = RslPPO.construct_algorithm(rsl_env.get_observations(), rsl_env, rsl_rl_config(agent, seed), "cpu")
    rsl.train_mode()
    with torch.no_grad():
        for _, a, b in param_pairs(mj, rsl):
            b.copy_(a)
        copy_normalizer(mj.policy.actor_normalizer, rsl.actor.obs_normalizer)
        copy_normalizer(mj.policy.critic_normalizer, rsl.critic.obs_normalizer)
    # Some envs near their time limit, so that the rollout has time-outs to bootstrap.
    env.episode_length[:forced_timeouts] = env.max_episode_length - 1 - torch.arange(forced_timeouts) % steps
    return task, agent, env, mj, rsl


# --------------------------------------------------------------------------- rollout


def td(obs, n: int) -> TensorDict:
    return TensorDict(dict(obs), batch_size=[n])


def collect(env: VecEnv, mj, rsl, steps: int) -> dict:
    n, obs = env.num_envs, env.obs
    timeouts = torch.zeros(steps, n, dtype=torch.bool)
    final_values = torch.zeros(steps, n)
    with torch.inference_mode():
        for t in range(steps):
            actions = mj.act(obs)
            rsl.act(td(obs, n))
            rsl.transition.actions = actions.clone()
            rsl.transition.actions_log_prob = rsl.actor.get_output_log_prob(actions).detach()
            obs, rewards, terminated, truncated, extras = env.step(actions)
            timeouts[t] = truncated
            final_values[t] = mj.value(extras["final_obs"]["critic"])
            mj.process_env_step(rewards, terminated, truncated, extras)
            rsl.process_env_step(td(obs, n), rewards, (terminated | truncated).long(), {"time_outs": truncated})
        mj.compute_returns(obs)
        rsl.compute_returns(td(obs, n))
    return {"last_obs": obs, "timeouts": timeouts, "final_values": final_values}


def compare_storage(mj, rsl, info: dict) -> None:
    b, s = mj.storage, rsl.storage
    print("stored rollout (each algorithm's own act / process_env_step):")
    row("actor observations", b.actor_obs, s.observations["actor"])
    row("critic observations", b.critic_obs, s.observations["critic"])
    row("actions", b.actions, s.actions)
    row("log-probs", b.log_probs, s.actions_log_prob.squeeze(-1))
    row("values", b.values, s.values.squeeze(-1))
    row("action mean", b.action_mean, s.distribution_params[0])
    row("action std", b.action_std, s.distribution_params[1])
    row("dones", b.dones, s.dones.squeeze(-1).float())
    to = info["timeouts"]
    d = (b.rewards - s.rewards.squeeze(-1)).abs()
    print(f"  time-outs in the rollout: {int(to.sum())}")
    print(f"  rewards, steps without time-out             max|diff| {d[~to].max().item():.3e}")
    if to.any():
        gamma = mj.cfg.gamma
        expected = gamma * (info["final_values"] - b.values)[to]  # mjrl: V(final obs); rsl_rl: V(s_t)
        print(
            f"  rewards, time-out steps                     max|diff| {d[to].max().item():.3e}"
            f" (gamma*|V(final obs) - V(s_t)| there: max {expected.abs().max().item():.3e},"
            f" mismatch to it {maxdiff((b.rewards - s.rewards.squeeze(-1))[to], expected):.1e})"
        )
    # Normalised inputs: both normalisers hold mjrl's statistics; mjrl also clips at +-10.
    with torch.no_grad():
        a_mj = mj.policy.normalize_actor(b.actor_obs.flatten(0, 1))
        a_rsl = rsl.actor.obs_normalizer(b.actor_obs.flatten(0, 1))
    clip = mj.policy.actor_normalizer.clip
    print(
        f"  normalised actor obs                        max|diff| {maxdiff(a_mj, a_rsl):.3e}"
        f" (|rsl_rl's| > {clip:g}: {int((a_rsl.abs() > clip).sum())} entries, max {a_rsl.abs().max().item():.2f})"
    )


def share_rollout(mj, rsl, last_obs, exact_advantages: bool = False) -> None:
    """Overwrite rsl_rl's stored rollout with mjrl's (rewards with mjrl's bootstrap, values,
    log-probs, distribution parameters) and recompute its returns: from here on only the update
    differs."""
    b, s = mj.storage, rsl.storage
    with torch.inference_mode():
        s.rewards.copy_(b.rewards.unsqueeze(-1))
        s.values.copy_(b.values.unsqueeze(-1))
        s.actions_log_prob.copy_(b.log_probs.unsqueeze(-1))
        s.distribution_params[0].copy_(b.action_mean)
        s.distribution_params[1].copy_(b.action_std)
        rsl.compute_returns(td(last_obs, mj.storage.values.shape[1]))
        if exact_advantages:  # mjrl's normalisation (population std) instead of torch.std's n - 1
            raw = s.returns - s.values
            mean = raw.double().mean()
            std = ((raw.double() - mean) ** 2).mean().sqrt()
            s.advantages = ((raw - mean.item()) / (std.item() + 1e-8)).float()


# --------------------------------------------------------------------------- recording


class MjrlRecorder:
    """Wraps mjrl's module functions and PPO methods to record each minibatch step."""

    def __init__(self, mj):
        self.mj = mj
        self.steps: list[dict] = []
        self.current: dict = {}
        self.gae = None
        self.adv_stats = None
        self.perms: list[torch.Tensor] = []

    @contextlib.contextmanager
    def active(self, perm: torch.Tensor | None = None, fresh_after_first: bool = False):
        mj, rec = self.mj, self
        saved = {k: getattr(mjrl_ppo, k) for k in ("compute_gae", "surrogate_loss", "value_loss", "gaussian_kl")}
        randperm = torch.randperm

        def compute_gae(*a, **k):
            out = saved["compute_gae"](*a, **k)
            rec.gae = tuple(x.clone() for x in out)
            return out

        def surrogate_loss(ratio, adv, clip):
            rec.current.update(ratio=ratio.detach().clone(), mb_advantages=adv.clone())
            out = saved["surrogate_loss"](ratio, adv, clip)
            rec.current["surrogate"] = out.item()
            return out

        def value_loss(values, old, returns, clip):
            out = saved["value_loss"](values, old, returns, clip)
            rec.current["value"] = out.item()
            rec.current["mb_returns"] = returns.clone()
            return out

        def gaussian_kl(*a):
            out = saved["gaussian_kl"](*a)
            rec.current["kl"] = out.mean().item()
            return out

        distribution = mj.policy.distribution

        def distribution_rec(obs):
            dist = distribution(obs)
            if torch.is_grad_enabled():  # the update's, not act's
                rec.current["entropy"] = dist.entropy().mean().item()
            return dist

        pool = mj._pool_rollout_statistics

        def pool_rec(advantages, buf):
            out = pool(advantages, buf)
            rec.adv_stats = out
            return out

        adapt = mj._adapt_learning_rate

        def adapt_rec(kl, skip):
            rec.current["lr_before"] = mj.learning_rate
            adapt(kl, skip)

        clip_gradients = mj.clip_gradients

        def clip_rec():
            rec.current["grads_preclip"] = {id(p): p.grad.clone() for p in mj.params}
            clip_gradients()
            rec.current["grads_postclip"] = {id(p): p.grad.clone() for p in mj.params}
            rec.current["lr"] = mj.learning_rate
            rec.steps.append(rec.current)
            rec.current = {}

        def randperm_rec(size, *a, **k):
            if perm is not None and not (fresh_after_first and rec.perms):
                out = perm.clone()
            else:
                out = randperm(size, *a, **k)
            rec.perms.append(out.clone())
            return out

        for k, f in (
            ("compute_gae", compute_gae),
            ("surrogate_loss", surrogate_loss),
            ("value_loss", value_loss),
            ("gaussian_kl", gaussian_kl),
        ):
            setattr(mjrl_ppo, k, f)
        mj.policy.distribution = distribution_rec
        mj._pool_rollout_statistics = pool_rec
        mj._adapt_learning_rate = adapt_rec
        mj.clip_gradients = clip_rec
        torch.randperm = randperm_rec
        try:
            yield
        finally:
            for k, f in saved.items():
                setattr(mjrl_ppo, k, f)
            for name in ("distribution",):
                delattr(mj.policy, name)
            for name in ("_pool_rollout_statistics", "_adapt_learning_rate", "clip_gradients"):
                delattr(mj, name)
            torch.randperm = randperm


class RslRecorder:
    """Wraps rsl_rl's optimizer, gradient clip, KL and Tensor.item to record each minibatch step."""

    def __init__(self, rsl):
        self.rsl = rsl
        self.steps: list[dict] = []
        self.current: dict = {"grads_preclip": {}, "clip_norms": []}
        self.items: list[float] = []
        self.perms: list[torch.Tensor] = []

    @contextlib.contextmanager
    def active(self, perm: torch.Tensor | None = None):
        rsl, rec = self.rsl, self
        clip_grad_norm = torch.nn.utils.clip_grad_norm_
        step, kl_of, log_prob_of = rsl.optimizer.step, rsl.actor.get_kl_divergence, rsl.actor.get_output_log_prob
        item, randperm = torch.Tensor.item, torch.randperm
        recording_items = [True]

        def clip_rec(params, max_norm, *a, **k):
            params = list(params)
            for p in params:
                rec.current["grads_preclip"][id(p)] = p.grad.clone()
            recording_items[0] = False
            try:
                norm = clip_grad_norm(params, max_norm, *a, **k)
            finally:
                recording_items[0] = True
            rec.current["clip_norms"].append(item(norm))
            return norm

        def step_rec(*a, **k):
            params = [p for g in rsl.optimizer.param_groups for p in g["params"]]
            rec.current["grads_postclip"] = {id(p): p.grad.clone() for p in params}
            rec.current["lr"] = rsl.optimizer.param_groups[0]["lr"]
            rec.steps.append(rec.current)
            rec.current = {"grads_preclip": {}, "clip_norms": []}
            recording_items[0] = False  # Adam reads its step count with .item()
            try:
                return step(*a, **k)
            finally:
                recording_items[0] = True

        def kl_rec(old, new):
            kl = kl_of(old, new)
            rec.current["kl"] = item(kl.mean())
            return kl

        def log_prob_rec(actions):
            out = log_prob_of(actions)
            rec.current["log_prob"] = out.detach().clone()
            return out

        def item_rec(self_):
            out = item(self_)
            if recording_items[0]:
                rec.items.append(out)
            return out

        def randperm_rec(size, *a, **k):
            out = perm.clone() if perm is not None else randperm(size, *a, **k)
            rec.perms.append(out.clone())
            return out

        torch.nn.utils.clip_grad_norm_ = clip_rec
        rsl.optimizer.step = step_rec
        rsl.actor.get_kl_divergence = kl_rec
        rsl.actor.get_output_log_prob = log_prob_rec
        torch.randperm = randperm_rec
        try:
            torch.Tensor.item = item_rec
            yield
        finally:
            torch.Tensor.item = item
            torch.nn.utils.clip_grad_norm_ = clip_grad_norm
            del rsl.optimizer.step
            del rsl.actor.get_kl_divergence
            del rsl.actor.get_output_log_prob
            torch.randperm = randperm


# --------------------------------------------------------------------------- comparison


def compare_update(label: str, mj, rsl, mrec: MjrlRecorder, rrec: RslRecorder, rsl_items: list[float]) -> None:
    pairs = param_pairs(mj, rsl)
    n = min(len(mrec.steps), len(rrec.steps))
    print(f"\n{label}: {len(mrec.steps)} mjrl steps, {len(rrec.steps)} rsl_rl steps")
    # rsl_rl's own .item() calls per step, after its optimizer step: value loss, surrogate loss, entropy.
    assert len(rsl_items) == 3 * len(rrec.steps), (len(rsl_items), len(rrec.steps))
    per_step = [rsl_items[i * 3 : (i + 1) * 3] for i in range(len(rrec.steps))]
    print(
        "  step |  surrogate mjrl / rsl_rl diff | value loss mjrl / diff | entropy diff |"
        " KL mjrl / rsl_rl          | lr mjrl / rsl_rl      | ratio diff | clip flips"
    )
    for i in range(n):
        m, r = mrec.steps[i], rrec.steps[i]
        v, s, e = per_step[i]
        # rsl_rl's ratio on the same samples: its new log-prob minus the (shared) old one.
        mbs = r["log_prob"].numel()
        j = i % (rrec.perms[0].numel() // mbs)
        old = rsl.storage.actions_log_prob.reshape(-1)[rrec.perms[0]][j * mbs : (j + 1) * mbs]
        ratio_rsl = torch.exp(r["log_prob"] - old)
        clip = mj.cfg.clip_param
        flips = int((((m["ratio"] - 1).abs() > clip) != ((ratio_rsl - 1).abs() > clip)).sum())
        print(
            f"  {i:4d} | {m['surrogate']:+.6f} {m['surrogate'] - s:+.1e} | {m['value']:9.4f} {m['value'] - v:+.1e}"
            f" | {m['entropy'] - e:+.1e} | {m['kl']:.3e} / {r['kl']:.3e} | {m['lr']:.3e} / {r['lr']:.3e}"
            f" | {maxdiff(m['ratio'], ratio_rsl):.1e}   | {flips}"
        )
    m0, r0 = mrec.steps[0], rrec.steps[0]
    print("  gradients of the first backward pass (before clipping | after clipping):")
    for name, a, b in pairs:
        pre = maxdiff(m0["grads_preclip"][id(a)], r0["grads_preclip"][id(b)])
        post = maxdiff(m0["grads_postclip"][id(a)], r0["grads_postclip"][id(b)])
        biggest = m0["grads_preclip"][id(a)].abs().max().item()
        print(f"    {name:<22s} {pre:.3e} | {post:.3e}   (max |grad| {biggest:.3e})")
    mj_norms = []
    for net in ("actor", "critic"):
        ps = [a for name, a, _ in pairs if name.startswith(net) or (net == "actor" and name == "std")]
        flat = torch.cat([m0["grads_preclip"][id(p)].reshape(-1) for p in ps])
        mj_norms.append(torch.linalg.vector_norm(flat).item())
    print(
        f"  pre-clip grad norms actor/critic: mjrl {mj_norms[0]:.4f} / {mj_norms[1]:.4f}; "
        f"rsl_rl clip_grad_norm_ saw {r0['clip_norms'][0]:.4f} / {r0['clip_norms'][1]:.4f}"
    )
    print("  parameters after the update (max|diff| | max|change| of mjrl's):")
    for name, a, b in pairs:
        print(f"    {name:<22s} {maxdiff(a.detach(), b.detach()):.3e} | {maxdiff(a.detach(), mrec.start[name]):.3e}")
    for group, mjn, rsln in (
        ("actor", mj.policy.actor_normalizer, rsl.actor.obs_normalizer),
        ("critic", mj.policy.critic_normalizer, rsl.critic.obs_normalizer),
    ):
        print(
            f"  {group} normaliser after update: mean diff {maxdiff(mjn.mean, rsln._mean):.2e}, "
            f"var diff {maxdiff(mjn.var, rsln._var):.2e}"
            f" (rel {maxdiff(mjn.var / rsln._var.squeeze(0).double(), 1.0):.1e}),"
            f" count {int(mjn.count)} / {int(rsln.count)}"
        )


def run_case(args, epochs: int, minibatches: int, mode: str, iterations: int = 1) -> None:
    torch.manual_seed(args.seed)
    _, agent, env, mj, rsl = build(args.seed, args.num_envs, epochs, minibatches, args.forced_timeouts)
    steps = agent.runner.num_steps_per_env
    print(f"\n=== {epochs} epoch(s) x {minibatches} minibatch(es), {mode}: {env.num_envs} envs x {steps} steps ===")
    for iteration in range(iterations):
        if iterations > 1:
            print(f"\n--- iteration {iteration} (weights, Adam state, learning rate and normalisers carried over) ---")
        info = collect(env, mj, rsl, steps)
        if mode == "first" or iteration > 0:
            compare_storage(mj, rsl, info)
        share_rollout(mj, rsl, info["last_obs"], args.exact_advantages)

        size = env.num_envs * steps
        perm = torch.randperm(size, generator=torch.Generator().manual_seed(args.seed + 1000 + iteration))
        if minibatches == 1 and epochs == 1:
            perm = torch.arange(size)  # no shuffling
        mrec, rrec = MjrlRecorder(mj), RslRecorder(rsl)
        mrec.start = {name: a.detach().clone() for name, a, _ in param_pairs(mj, rsl)}
        with mrec.active(perm, fresh_after_first=(mode == "mjrl fresh permutation per epoch")):
            mj.update()
        with rrec.active(perm):
            rsl.update()
        print(
            f"  permutations drawn: mjrl {len(mrec.perms)}, rsl_rl {len(rrec.perms)}; "
            f"mjrl's all equal rsl_rl's: {all(torch.equal(p, rrec.perms[0]) for p in mrec.perms)}"
        )

        if mode == "first":
            adv, ret = mrec.gae
            s = rsl.storage
            raw_rsl = (s.returns - s.values).squeeze(-1)
            print("returns and advantages:")
            row("returns", ret, s.returns.squeeze(-1))
            row("advantages before normalisation", adv, raw_rsl)
            mean, std = mrec.adv_stats
            print(
                f"  advantage normalisation: mjrl mean {mean:.6f}, std {std:.6f} (population std, whole rollout,"
                f" in update_on); rsl_rl mean {raw_rsl.mean().item():.6f}, std {raw_rsl.std().item():.6f}"
                f" (unbiased torch.std, whole rollout, in compute_returns)"
            )
            row("advantages after normalisation", (adv - mean) / (std + 1e-8), s.advantages.squeeze(-1))
            m0 = mrec.steps[0]
            row(
                "first minibatch: advantages fed to the loss",
                m0["mb_advantages"],
                s.advantages.reshape(-1)[perm][: m0["mb_advantages"].numel()],
            )
        compare_update(f"update ({mode})", mj, rsl, mrec, rrec, rrec.items)
        print(f"  learning rate after the update: mjrl {mj.learning_rate:.4e}, rsl_rl {rsl.learning_rate:.4e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=3, help="iterations of the same-permutation case")
    parser.add_argument(
        "--exact-advantages",
        action="store_true",
        help="give rsl_rl mjrl's advantage normalisation (population std), the one update difference",
    )
    parser.add_argument("--forced-timeouts", type=int, default=8, help="envs started near their time limit")
    args = parser.parse_args()
    torch.set_num_threads(1)
    run_case(args, 1, 1, "first")
    task = load_task(TASK)
    epochs, minibatches = task.agent_cfg.algorithm.num_learning_epochs, task.agent_cfg.algorithm.num_mini_batches
    run_case(args, epochs, minibatches, "same permutation for every epoch in both", args.iterations)
    run_case(args, epochs, minibatches, "mjrl fresh permutation per epoch")


if __name__ == "__main__":
    main()
