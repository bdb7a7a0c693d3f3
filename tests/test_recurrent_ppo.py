"""Recurrent policies in PPO (`--policy.rnn-type`), on the position-only cart-pole as `train`
builds it: the update's windows replay exactly what the rollout computed step by step (states
stored, carried, zeroed at episode ends), play carries its own state, and a resume restores
what the learner holds."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from conftest import DEVICE

from mjrl.distributed.context import single_process
from mjrl.rl.recurrent import RecurrentActorCritic
from mjrl.runner.config import TrainConfig
from mjrl.runner.start import build_run
from mjrl.tasks import load_task

POSITIONS = "Mjrl-Cartpole-Balance-Positions"


def recurrent_run(log_root: Path, rnn_type: str = "lstm", resume: bool = False, **policy: object):
    """16 envs x 16 steps of 0.25 s episodes (5 steps: episodes end inside every window),
    windows of 6 steps after a burn-in of 2, 2 minibatches."""
    task = load_task(POSITIONS)
    cfg = TrainConfig.for_task(task, "ppo")
    policy_cfg = dataclasses.replace(
        cfg.policy, rnn_type=rnn_type, rnn_hidden_size=16, rnn_sequence_length=6, rnn_burn_in=2, **policy
    )
    return build_run(task, dataclasses.replace(
        cfg, env=dataclasses.replace(cfg.env, num_envs=16, episode_length_s=0.25), policy=policy_cfg,
        algorithm=dataclasses.replace(cfg.algorithm, num_mini_batches=2), device=DEVICE, logger="none",
        log_root=str(log_root), runner=dataclasses.replace(cfg.runner, num_steps_per_env=16, max_iterations=3,
                                                           save_interval=3),
        resume=resume,
    ), single_process(DEVICE))  # fmt: skip


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_windows_replay_the_rollout_step_by_step(tmp_path, rnn_type):
    """From the states stored at their starts, zeroed where an episode begins inside them, the
    windows give every step's action mean and value as the rollout computed them; the loss
    counts each step once; a corrupted stored state or a missed reset is seen."""
    runner = recurrent_run(tmp_path, rnn_type)
    ppo, policy = runner.algorithm, runner.algorithm.policy
    assert isinstance(policy, RecurrentActorCritic) and set(policy.memories) == {"actor", "critic"}
    runner.collect()
    buf = ppo.storage
    assert buf.dones.sum() >= 16 * 2 and bool(buf.starts[0].all())  # episodes end inside the windows

    def replayed(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        seq = {k: v.transpose(0, 1) for k, v in batch.items() if not k.endswith("_state")}
        states = {net: batch[f"{net}_state"].transpose(0, 1) for net in policy.memories}
        with torch.no_grad():
            means, values = (
                policy.window_features(net, seq[f"{net}_obs"], states[net], seq["starts"], seq["valid"])
                for net in ("actor", "critic")
            )
            return policy.mean_action(means).transpose(0, 1), policy.value(values).transpose(0, 1)

    batch, _ = ppo._rollout_batch(buf, ppo.last_values)
    means, values = replayed(batch)
    loss = batch["weights"].bool()
    assert int(loss.sum()) == 16 * 16  # every step a loss position once
    torch.testing.assert_close(means[loss], batch["mu"][loss], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values[loss], batch["values"][loss], rtol=1e-5, atol=1e-5)

    # Without the resets inside the windows, the replay no longer matches where episodes began.
    no_resets = {**batch, "starts": torch.zeros_like(batch["starts"])}
    assert not torch.allclose(replayed(no_resets)[0][loss], batch["mu"][loss], atol=1e-3)
    # A stored state that is not the one the rollout began a window from changes the window.
    wrong = {**batch, "actor_state": batch["actor_state"] + 0.5}
    assert not torch.allclose(replayed(wrong)[0][loss], batch["mu"][loss], atol=1e-3)


def test_play_carries_a_state_per_env_and_forgets_it_where_an_episode_ends(tmp_path):
    policy = recurrent_run(tmp_path, "gru").algorithm.policy
    obs = torch.randn(4, policy.obs_dims["actor"], device=DEVICE)
    first = policy.act_deterministic(obs)
    second = policy.act_deterministic(obs)
    assert not torch.allclose(first, second)  # the same observation after one step of memory
    policy.reset(torch.tensor([True, False, True, False], device=DEVICE))
    third = policy.act_deterministic(obs)
    torch.testing.assert_close(third[0::2], first[0::2])  # from zero again
    assert not torch.allclose(third[1::2], first[1::2])


def test_a_resume_restores_what_the_recurrent_learner_holds(tmp_path):
    """Three iterations, then a resume: weights, normalisers, optimizer and random stream are
    the first run's bit for bit; the memories' states start at zero, as the env's episodes
    restart; the next update on the same rollout is the same."""
    first = recurrent_run(tmp_path / "run")
    first.run()
    resumed = recurrent_run(tmp_path / "run", resume=True)
    a, b = first.algorithm, resumed.algorithm
    for x, y in zip(a.state_dict()["policy"].values(), b.state_dict()["policy"].values(), strict=True):
        assert torch.equal(x, y)
    assert torch.equal(a.generator.get_state(), b.generator.get_state())
    assert all(bool((state == 0).all()) for state in b.states.values()) and bool(b.episode_start.all())
    for name, value in a.storage.fields.items():
        b.storage.fields[name].copy_(value)
    b.last_values.copy_(a.last_values)
    sums = a.update(), b.update()
    assert all(torch.equal(sums[0][k], sums[1][k]) for k in sums[0])
    assert torch.equal(a.parameter_checksum(), b.parameter_checksum())


def test_a_recurrent_student_stores_the_states_it_acted_from_and_distils_from_a_recurrent_teacher(tmp_path):
    """DAgger with an LSTM student and a GRU teacher (its own state carried, reset where episodes
    end): the states stored at every step are those a step-by-step replay of the student
    reaches, zeroed where an episode begins; the update's windows replay them; two updates on
    the same rollout lower the behaviour loss."""
    from mjrl.rl.recurrent_distillation import RecurrentDistillation

    teacher_task = load_task("Mjrl-Velocity-Flat-Quadruped")
    teacher_cfg = TrainConfig.for_task(teacher_task, "ppo")
    teacher = build_run(teacher_task, dataclasses.replace(
        teacher_cfg, env=dataclasses.replace(teacher_cfg.env, num_envs=8), device=DEVICE, logger="none",
        policy=dataclasses.replace(teacher_cfg.policy, rnn_type="gru", rnn_hidden_size=8),
        algorithm=dataclasses.replace(teacher_cfg.algorithm, num_mini_batches=2, warm_up_normalizers=False),
        runner=dataclasses.replace(teacher_cfg.runner, num_steps_per_env=8, max_iterations=1, eval_interval=0),
        log_root=str(tmp_path / "teacher"),
    ), single_process(DEVICE))  # fmt: skip
    teacher.run()
    teacher_run = teacher.run_dir
    task = load_task("Mjrl-Velocity-Flat-Quadruped-Student")
    cfg = TrainConfig.for_task(task, "distillation")
    runner = build_run(task, dataclasses.replace(
        cfg, env=dataclasses.replace(cfg.env, num_envs=8, episode_length_s=0.2), device=DEVICE, logger="none",
        policy=dataclasses.replace(cfg.policy, rnn_type="lstm", rnn_hidden_size=16, rnn_sequence_length=5),
        algorithm=dataclasses.replace(cfg.algorithm, teacher=str(teacher_run), num_mini_batches=2),
        runner=dataclasses.replace(cfg.runner, num_steps_per_env=12), log_root=str(tmp_path / "student"),
    ), single_process(DEVICE))  # fmt: skip
    distil, student = runner.algorithm, runner.algorithm.policy
    assert isinstance(distil, RecurrentDistillation) and isinstance(distil.teacher, RecurrentActorCritic)
    runner.collect()
    buf = distil.storage
    assert buf.starts[1:].sum() >= 8 and distil.teacher._play_state is not None
    state = torch.zeros_like(distil.state)
    with torch.no_grad():
        for t in range(12):
            state = torch.where(buf.starts[t].view(1, -1, 1), 0.0, state)
            torch.testing.assert_close(buf.state[t].transpose(0, 1), state, rtol=1e-5, atol=1e-6)
            state = student.step_features("actor", student.normalize_actor(buf.student_obs[t]), state)[1]
    snapshot = {name: value.clone() for name, value in buf.fields.items()}
    losses = []
    for _ in range(2):
        for name, value in snapshot.items():
            buf.fields[name].copy_(value)
        sums = distil.update()
        losses.append(float(sums["behavior_loss"] / sums["steps"]))
    assert losses[1] < losses[0]
