"""How the terrain curriculum judges a robot that tracks every command perfectly.

    python scripts/curriculum_yardstick.py [--task Mjrl-Velocity-Rough-Quadruped] [--episodes 4000]

A kinematic model, no physics: each episode draws the rough task's commands (forward and lateral
velocity, a heading, a standing share, resampled after 3-8 s), the base turns at the commanded
yaw rate (0.5 rad/s per rad of heading error, clipped) and moves at exactly the commanded
velocity. It prints the shares of whole episodes the curriculum would promote (farther than
half a patch from the start) and demote (less than half the distance asked for), with the
distance asked for measured two ways: legged_gym's (the last command's speed times the
episode length) and mjrl's (the end-to-end displacement of the commanded path). A perfect
tracker should never be demoted.
"""

from __future__ import annotations

import argparse

import numpy as np

from mjrl.tasks import load_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjrl-Velocity-Rough-Quadruped")
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    cfg = load_task(args.task).env_cfg
    commands, dt = cfg.commands, cfg.sim.timestep * cfg.sim.decimation
    rng, n = np.random.default_rng(args.seed), args.episodes

    def draw() -> np.ndarray:
        drawn = np.stack(
            [rng.uniform(*commands.lin_vel_x, n), rng.uniform(*commands.lin_vel_y, n), rng.uniform(-np.pi, np.pi, n)],
            axis=1,
        )
        drawn[rng.random(n) < commands.standing_fraction, :2] = 0.0
        return drawn

    position, path = np.zeros((n, 2)), np.zeros((n, 2))
    heading = rng.uniform(-np.pi, np.pi, n)
    command, timer = draw(), rng.uniform(*commands.resample_interval_s, n)
    for _ in range(round(cfg.episode_length_s / dt)):
        timer -= dt
        due = timer <= 0
        command[due], timer[due] = draw()[due], rng.uniform(*commands.resample_interval_s, due.sum())
        error = np.arctan2(np.sin(command[:, 2] - heading), np.cos(command[:, 2] - heading))
        moving = np.abs(command[:, :2]).sum(axis=1) > 0
        heading += np.clip(0.5 * error, *commands.yaw_rate) * moving * dt
        forward = np.stack([np.cos(heading), np.sin(heading)], axis=1)
        left = np.stack([-forward[:, 1], forward[:, 0]], axis=1)
        velocity = command[:, :1] * forward + command[:, 1:2] * left
        position += velocity * dt
        path += velocity * dt
    distance = np.linalg.norm(position, axis=1)
    promoted = distance > cfg.terrain.patch_size / 2
    asked = {
        "last command x episode length (legged_gym)": np.linalg.norm(command[:, :2], axis=1) * cfg.episode_length_s,
        "commanded path displacement (mjrl)": np.linalg.norm(path, axis=1),
    }
    print(f"{args.task}: a perfect tracker, {n} episodes of {cfg.episode_length_s:.0f} s; mean distance "
          f"{distance.mean():.2f} m, promoted {promoted.mean():.1%}")  # fmt: skip
    for name, distance_asked in asked.items():
        demoted = ~promoted & (distance < 0.5 * distance_asked)
        print(f"  demoted, asked distance = {name}: {demoted.mean():.1%} (mean asked {distance_asked.mean():.2f} m)")


if __name__ == "__main__":
    main()
