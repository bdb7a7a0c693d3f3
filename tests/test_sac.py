"""SAC (`--algo sac`, `mjrl.rl.sac`): its returns and its critics' projection against plain
loops, its ring's windows, its policy's squash, and whole runs: a resume equal to the run it
continues, the update replayed as the emulated graphs would."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import onnxruntime
import pytest
import torch
from capture import EmulatedGraph
from conftest import DEVICE

from mjrl.distributed.context import single_process
from mjrl.metrics_file import read_metrics
from mjrl.rl.critics import TwinCritic, critics_value, n_step_returns, project_onto_support, target_distribution
from mjrl.rl.networks import SquashedGaussianPolicy
from mjrl.rl.storage import Field, ReplayRing
from mjrl.runner.config import TrainConfig
from mjrl.runner.graphs import LoopGraphs
from mjrl.runner.start import build_run
from mjrl.tasks import load_task
from mjrl.tools.export import export_policy


def loop_n_step(rewards, terminated, truncated, gamma):
    """n-step returns one window and one step at a time."""
    batch, n = rewards.shape
    returns, discounts, last = torch.zeros(batch), torch.zeros(batch), torch.zeros(batch, dtype=torch.long)
    for b in range(batch):
        total, discount = 0.0, 1.0
        for k in range(n):
            total += discount * rewards[b, k].item()
            discount *= gamma
            if terminated[b, k] or truncated[b, k] or k == n - 1:
                returns[b], discounts[b], last[b] = total, 0.0 if terminated[b, k] else discount, k
                break
    return returns, discounts, last


def test_n_step_returns_stop_at_an_episodes_end_and_bootstrap_only_time_outs():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randn(400, 4, generator=g)
    terminated, truncated = torch.rand(400, 4, generator=g) < 0.15, torch.rand(400, 4, generator=g) < 0.15
    got = n_step_returns(rewards, terminated, truncated, 0.9)
    for a, b in zip(got, loop_n_step(rewards, terminated, truncated, 0.9), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    # By hand: a time-out at step 1 bootstraps with gamma^2, a termination there with 0.
    ones, cut = torch.ones(2, 3), torch.tensor([[False, True, False]] * 2)
    timed_out, fell = cut & torch.tensor([[True], [False]]), cut & torch.tensor([[False], [True]])
    returns, discount, last = n_step_returns(ones, fell, timed_out, 0.5)
    assert returns.tolist() == [1.5, 1.5] and discount.tolist() == [0.25, 0.0] and last.tolist() == [1, 1]


def loop_projection(atoms, target_atoms, probs):
    """C51's projection, one atom at a time."""
    k, v_min, v_max = atoms.numel(), atoms[0].item(), atoms[-1].item()
    delta, out = (v_max - v_min) / (k - 1), torch.zeros_like(probs)
    for b in range(probs.shape[0]):
        for j in range(k):
            position = (min(max(target_atoms[b, j].item(), v_min), v_max) - v_min) / delta
            lower = math.floor(position)
            out[b, lower] += probs[b, j] * (1 - (position - lower))
            out[b, min(lower + 1, k - 1)] += probs[b, j] * (position - lower)
    return out


def test_the_c51_projection_equals_a_plain_loop_and_keeps_the_mass():
    g = torch.Generator().manual_seed(1)
    atoms = torch.linspace(-10.0, 10.0, 11)
    target_atoms = 8.0 * torch.randn(64, 11, generator=g)  # some beyond the support
    target_atoms[0] = atoms  # on the atoms exactly: unchanged
    probs = torch.softmax(torch.randn(64, 11, generator=g), dim=-1)
    projected, clipped = project_onto_support(atoms, target_atoms, probs)
    torch.testing.assert_close(projected, loop_projection(atoms, target_atoms, probs), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(projected.sum(-1), torch.ones(64))
    torch.testing.assert_close(projected[0], probs[0])
    outside = (target_atoms.abs() > 10.0).float()
    torch.testing.assert_close(clipped, (outside * probs).sum(-1))
    assert 0 < clipped.mean() < 1


def test_the_rings_windows_wrap_around_and_stay_within_one_env():
    """A ring of 4 steps of 3 envs, after 6 steps: windows of 2 consecutive steps of one env
    among the newest 4 steps (the oldest 2 overwritten), across the wrap."""
    envs, ring = 3, ReplayRing(4 * 3, {"step": Field(), "env": Field()}, torch.device("cpu"))
    assert ring.windows_held(2, envs).item() == 0
    for step in range(6):
        ring.add(step=torch.full((envs,), float(step)), env=torch.arange(envs, dtype=torch.float32))
    assert ring.windows_held(2, envs).item() == 3
    windows = ring.sample_windows(2000, 2, envs, torch.Generator().manual_seed(0))
    steps, env = windows["step"], windows["env"]
    assert torch.equal(steps[:, 1] - steps[:, 0], torch.ones(2000)) and torch.equal(env[:, 0], env[:, 1])
    assert set(steps[:, 0].tolist()) == {2.0, 3.0, 4.0} and set(env[:, 0].tolist()) == {0.0, 1.0, 2.0}
    assert ring.newest(envs)["step"].tolist() == [5.0, 5.0, 5.0]


def test_layer_normed_critics_keep_their_values_bounded_far_from_their_data():
    """`critic_layer_norm`: a LayerNorm after each hidden layer, so that inputs a thousand times
    those seen give logits of the same size (a plain MLP's grow with them)."""
    torch.manual_seed(0)
    obs, actions = torch.randn(64, 7), torch.randn(64, 2)
    for layer_norm in (False, True):
        critic = TwinCritic(7, 2, (32, 16), "elu", 11, layer_norm=layer_norm)
        norms = [m for m in critic.nets[0] if isinstance(m, torch.nn.LayerNorm)]
        assert [m.normalized_shape for m in norms] == ([(32,), (16,)] if layer_norm else [])
        with torch.no_grad():
            near, far = critic(obs, actions).abs().max(), critic(1000 * obs, 1000 * actions).abs().max()
        assert (far < 10 * near) if layer_norm else (far > 100 * near)


def test_the_automatic_support_counts_an_episodes_end_once():
    """`v_max` 0: the support bounds a return of the rewards seen, the reward of a step that ended
    its episode earned once and the largest other one every step; not the largest of all every
    step (a legged robot's -10 for a fall made the support 13 times too wide)."""
    from test_symmetry import toy_sac

    from mjrl.rl.config import SymmetryConfig

    sac = toy_sac(SymmetryConfig())
    reward, ended = sac.ring.fields["reward"], sac.ring.fields["terminated"]
    reward[:4], reward[4], ended[4], reward[5] = 0.5, -10.0, True, -0.75
    sac.update()  # the first sets the support
    gamma, margin = sac.cfg.gamma, sac.cfg.support_margin
    assert sac.atoms[-1].item() == pytest.approx((10.0 + 0.75 / (1.0 - gamma)) * margin, rel=1e-6)


def test_the_squashed_policys_log_density_is_the_change_of_variables():
    """Its sampled actions lie within the bound, and its log-density is the Gaussian's less
    log |d action / d pre-squash action|, computed by autograd."""
    torch.manual_seed(0)
    policy = SquashedGaussianPolicy(3, 2, (8,), "elu", normalize=False, bound=0.5)
    obs, noise = torch.randn(5, 3), 3.0 * torch.randn(5, 2)
    actions, log_prob = policy.sample(obs, noise)
    assert actions.abs().max() < 0.5
    mean, log_std = policy.actor.mean_and_log_std(obs)
    pre = (mean + log_std.exp() * noise).detach().requires_grad_(True)
    squashed = 0.5 * torch.tanh(pre)
    jacobian = torch.autograd.grad(squashed.sum(), pre)[0]  # diagonal: one entry per action
    gaussian = torch.distributions.Normal(mean, log_std.exp()).log_prob(pre.detach()).sum(-1)
    torch.testing.assert_close(log_prob, gaussian - jacobian.log().sum(-1), rtol=1e-4, atol=1e-4)
    assert torch.equal(policy.act_deterministic(obs), 0.5 * torch.tanh(mean))


def sac_run(log_root: Path, resume: bool = False, **runner: object):
    """A small SAC run of Balance as `train` builds it: 16 envs x 8 steps, an update every 2."""
    task = load_task("Mjrl-Cartpole-Balance")
    cfg = TrainConfig.for_task(task, "sac")
    algorithm = dataclasses.replace(cfg.algorithm, batch_size=64, buffer_steps=16, update_every=2, learning_starts=4)
    return build_run(task, dataclasses.replace(
        cfg, env=dataclasses.replace(cfg.env, num_envs=16), algorithm=algorithm, device=DEVICE, logger="none",
        log_root=str(log_root), runner=dataclasses.replace(cfg.runner, num_steps_per_env=8, **runner), resume=resume,
    ), single_process(DEVICE))  # fmt: skip


def test_clipped_double_q_learns_from_the_critic_expecting_less_and_without_it_from_their_mixture():
    atoms = torch.linspace(-1.0, 1.0, 3)
    probs = torch.tensor([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]],  # critic 0 expects +1, then -1
                          [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]])  # critic 1 expects 0, then 0  # fmt: skip
    assert target_distribution(probs, atoms, True).tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert target_distribution(probs, atoms, False).tolist() == [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]]
    assert critics_value(probs, atoms, True).tolist() == [0.0, -1.0]
    assert critics_value(probs, atoms, False).tolist() == [0.5, -0.5]


def test_without_clipped_double_q_the_actor_reads_the_critics_mean(tmp_path):
    """`clipped_double_q`: the actor's return is the lower of the two critics' expectations, or
    their mean without it (critic 1 made to expect more than critic 0 everywhere)."""
    runs = {cdq: sac_run(tmp_path / str(cdq)) for cdq in (True, False)}
    for cdq, runner in runs.items():
        sac = runner.algorithm
        sac.cfg = dataclasses.replace(sac.cfg, clipped_double_q=cdq)
        with torch.no_grad():
            sac.atoms.copy_(torch.linspace(-10.0, 10.0, sac.atoms.shape[0]))  # a support, as the first update sets
            sac.critic.nets[1][-1].bias.add_(torch.linspace(-1.0, 1.0, sac.atoms.shape[0]))  # critic 1 expects more
    obs = runs[True].env.obs
    raw = {"actor": obs["actor"], "critic": obs["critic"]}
    noise = torch.randn(obs["actor"].shape[0], runs[True].algorithm.policy.num_actions, device=DEVICE)
    for cdq, runner in runs.items():
        sac = runner.algorithm
        normalized = {group: sac._normalize(group, x) for group, x in raw.items()}
        with torch.no_grad():
            actions, _ = sac.policy.sample(normalized["actor"], noise)
            expected = (torch.softmax(sac.critic(normalized["critic"], actions), -1) * sac.atoms).sum(-1)
            q = sac._actor_losses(normalized, noise)[2][0]
        assert bool((expected[1] > expected[0]).all())
        torch.testing.assert_close(q, (expected[0] if cdq else expected.mean(0)).mean())


TIMINGS = {"wall_s", "steps_per_second", "collection_s", "learning_s", "collective_s"}


def learned(runner) -> list[dict]:
    lines = read_metrics(runner.run_dir)
    return [{k: v for k, v in line.items() if k not in TIMINGS} for line in lines]


def flat_state(state: object) -> list[torch.Tensor]:
    """Every tensor of a nested state, in order (numbers as tensors)."""
    if isinstance(state, dict):
        return [t for key in sorted(state) for t in flat_state(state[key])]
    if isinstance(state, list | tuple):
        return [t for item in state for t in flat_state(item)]
    return [state if isinstance(state, torch.Tensor) else torch.tensor(float(state))]


def test_a_resume_restores_everything_sac_learns_with_and_its_update_replays_as_a_graph(tmp_path):
    """Three iterations, then a resume from their checkpoint and ring (bulk state): the resumed
    learner holds what the first one ended with (weights, targets, normalisers, temperature,
    support, optimizers, ring, random stream), bit for bit, and its next update is the same.
    (The envs restart their episodes at a resume, as for every algorithm, so the runs part
    there.) Then six iterations with the emulated graphs (a rollout segment of two steps and an
    update, captured at iteration 1) log what six eager ones log."""
    first = sac_run(tmp_path / "run", max_iterations=3, save_interval=3)
    first.run()
    # Iteration 0: its first update (after 2 steps) lacks a ring of 4 steps and is skipped.
    assert [line["gradient_steps"] for line in learned(first)] == [6, 8, 8]
    assert (first.run_dir / "checkpoints" / "bulk_000003.pt").exists()
    resumed = sac_run(tmp_path / "run", resume=True, max_iterations=6, save_interval=3)
    a, b = first.algorithm, resumed.algorithm
    for name, (x, y) in {
        "state": (a.state_dict(), b.state_dict()),
        "ring": (a.bulk_state(), b.bulk_state()),
        "random stream": (a.generator.get_state(), b.generator.get_state()),
    }.items():
        assert all(torch.equal(u, v) for u, v in zip(flat_state(x), flat_state(y), strict=True)), name
    # What play and export run: the squashed mean; the ONNX model within 1e-5, its sidecar says so.
    source = {"task": "t", "run_dir": "r", "checkpoint": "c", "iteration": 3, "env_steps": 0}
    out, sidecar = export_policy(first.env, a.inference_policy(), "onnx", tmp_path / "policy.onnx", source)
    obs = first.env.obs["actor"].cpu()
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    exported = torch.from_numpy(session.run(None, {"obs": obs.numpy()})[0])
    expected = a.inference_policy().act_deterministic(obs.to(first.env.device)).cpu()  # on the env's device
    torch.testing.assert_close(exported, expected, rtol=1e-5, atol=1e-5)
    assert json.loads(sidecar.read_text())["action_squash"]["bound"] == 1.0 and exported.abs().max() < 1.0
    sums = a.update(), b.update()
    assert all(torch.equal(sums[0][k], sums[1][k]) for k in sums[0]) and sums[0]["steps"] == 2
    assert torch.equal(a.parameter_checksum(), b.parameter_checksum())

    eager, graphed = (sac_run(tmp_path / name, max_iterations=6, save_interval=3) for name in ("eager", "graphed"))
    if DEVICE == "cpu":
        graphed.graphs = LoopGraphs(lambda: EmulatedGraph([graphed.env.sim]), graphed.ctx)
    assert graphed.run()["parameters_sha256"] == eager.run()["parameters_sha256"]
    # Iteration 0 eager; 1: its first segment pair captured, three replayed; 2-5: four each.
    assert graphed.graphs.replays == 2 * (3 + 4 * 4)
    assert learned(graphed) == learned(eager)


@pytest.mark.heavy
def test_a_compiled_sac_update_equals_the_eager_one_within_rounding(tmp_path):
    """`--runner.compile update` fuses the critics' and the actor's losses: two twins fill their
    rings alike, then update, one compiled: the same weights within 1e-5 (fused arithmetic
    rounds differently in the last bits), every step taken by both."""
    twins = [sac_run(tmp_path / name, max_iterations=1) for name in ("eager", "compiled")]
    twins[1].algorithm.compile(rollout=False, update=True)
    for runner in twins:
        runner.collect(8)
    sums = [runner.algorithm.update() for runner in twins]
    assert sums[0]["steps"] == sums[1]["steps"] == 2
    for eager, compiled in zip(twins[0].algorithm.parameters(), twins[1].algorithm.parameters(), strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)
    assert not torch.equal(twins[0].algorithm.parameters()[0], sac_run(tmp_path / "fresh").algorithm.parameters()[0])


def test_a_student_distils_from_a_sac_teacher(tmp_path):
    """A SAC run is a teacher like any other: `load_policy` (play's and export's loader too)
    rebuilds its squashed actor from the run's recorded algorithm."""
    from conftest import last_json, run_main

    tiny = ("--device", DEVICE, "--logger", "none", "--env.num-envs", "16", "--runner.num-steps-per-env", "8")
    sac = ("--algo", "sac", "--algorithm.batch-size", "64", "--algorithm.buffer-steps", "16")
    teacher = run_main("train", "Mjrl-Velocity-Flat-Quadruped", *tiny, *sac, "--runner.max-iterations", "1",
                       "--log-root", str(tmp_path))  # fmt: skip
    assert teacher.returncode == 0, teacher.stderr[-2000:]
    run_dir = last_json(teacher.stdout)["run_dir"]
    student = run_main("train", "Mjrl-Velocity-Flat-Quadruped-Student", *tiny, "--algo", "distillation",
                       "--algorithm.teacher", run_dir, "--algorithm.num-mini-batches", "2",
                       "--runner.max-iterations", "1", "--log-root", str(tmp_path))  # fmt: skip
    assert student.returncode == 0, student.stderr[-2000:]
    metrics = read_metrics(Path(last_json(student.stdout)["run_dir"]))[-1]
    assert math.isfinite(metrics["behavior_loss"])


def test_play_repeats_a_sac_runs_last_evaluation(tmp_path):
    """The periodic evaluation of the final policy (rank 0, `seed + 1_000_003`, `eval_envs`
    episodes from a fresh env) and `play` of the checkpoint written with it, given that seed and
    as many episodes, run the same episodes: the same mean return."""
    from conftest import last_json, run_main

    tiny = ("--device", DEVICE, "--logger", "none", "--env.num-envs", "16", "--runner.num-steps-per-env", "8")
    sac = ("--algo", "sac", "--algorithm.batch-size", "64", "--algorithm.buffer-steps", "16")
    trained = run_main("train", "Mjrl-Cartpole-Balance", *tiny, *sac, "--runner.max-iterations", "2",
                       "--runner.eval-interval", "1000", "--runner.eval-envs", "4", "--env.episode-length-s", "2",
                       "--log-root", str(tmp_path))  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    run_dir = Path(last_json(trained.stdout)["run_dir"])
    evaluated = read_metrics(run_dir)[-1]
    played = run_main("play", "Mjrl-Cartpole-Balance", "--run-dir", str(run_dir), "--device", DEVICE,
                      "--episodes", "4", "--seed", str(42 + 1_000_003))  # fmt: skip
    assert played.returncode == 0, played.stderr[-2000:]
    result = last_json(played.stdout)
    assert result["iteration"] == evaluated["iteration"] + 1 == 2
    assert (
        result["mean_return"] == evaluated["eval/mean_return"]
        and result["mean_length"] == evaluated["eval/mean_length"]
    )
