"""Does a trained policy follow its gait clock? Its swing joints and feet, by phase.

    python scripts/probe_gait_clock.py --run-dir RUN [--checkpoint PATH] [--speed 0.6] [--steps 300]

Plays the deterministic policy of a run whose task has a gait clock (`--env.gait.*`, the
humanoid's default) with clean observations and one forward command, and prints per tenth of
the cycle the mean offset from home of the first foot's reference-swing joints next to their
reference, and how often that foot touches the ground. A policy that ignores the clock shows
the same row for every phase; one that walks to it bends the leg and lifts the foot in the
foot's swing phase (for the humanoid's left foot: 0.55-1).
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

from mjrl.tasks import load_task
from mjrl.tasks.velocity import legged
from mjrl.tools.trained import load_checkpoint_of, load_trained, trained_env_config

BINS = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Humanoid")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--checkpoint", help="a checkpoint of the run (default: its newest)")
    parser.add_argument("--speed", type=float, default=0.6, help="forward command (m/s)")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)

    task = load_task(args.task)
    path, state = load_checkpoint_of(task, args.checkpoint, args.run_dir)
    cfg = trained_env_config(task, state)
    forward = dataclasses.replace(
        cfg.commands, lin_vel_x=(args.speed, args.speed), lin_vel_y=(0, 0), yaw_rate=(0, 0), standing_fraction=0
    )
    cfg = dataclasses.replace(cfg.for_evaluation(args.num_envs), commands=forward)
    env, policy = load_trained(task, state, path, cfg, torch.device("cpu"))
    clock = legged.GaitClock.of(cfg.gait)
    columns, feet, _ = clock.swing_joints(env)
    columns = columns[feet == 0]  # the first foot's leg

    offsets = torch.zeros(BINS, len(columns))
    reference = torch.zeros(BINS, len(columns))
    contact, samples = torch.zeros(BINS), torch.zeros(BINS)
    obs = env.obs
    with torch.no_grad():
        for _ in range(args.steps):
            obs = env.step(policy.act_deterministic(obs["actor"]))[0]
            bins = (clock.phase(env) * BINS).long().clamp(max=BINS - 1)
            one_hot = torch.nn.functional.one_hot(bins, BINS).float().T  # (bins, envs)
            offsets += one_hot @ legged.joint_pos_rel(env).index_select(1, columns)
            reference += one_hot @ clock.swing_reference(env)[:, feet == 0]
            contact += one_hot @ env.state.contacts[:, 0].float()
            samples += one_hot.sum(dim=1)

    names = [env.sim.actuator_joints()[c] for c in columns.tolist()]
    print(f"{path}: {cfg.robot.foot_geoms[0]}, forward {args.speed} m/s; offsets from home (rad), policy / reference")
    print("phase  " + "  ".join(f"{name:>24}" for name in names) + "  contact")
    n = samples.clamp(min=1).unsqueeze(1)
    for b in range(BINS):
        cells = "  ".join(f"{p:+10.3f} / {r:+10.3f}" for p, r in zip((offsets / n)[b], (reference / n)[b], strict=True))
        print(f"{b / BINS:.1f}    {cells}  {contact[b] / n[b, 0]:.2f}")


if __name__ == "__main__":
    main()
