"""Why does a trained legged policy fall? Runs its deterministic policy and prints each early end.

    python scripts/probe_falls.py --task Mjrl-Velocity-Flat-Mule --checkpoint RUN/checkpoints/model_001600.pt
        [--num-envs 64] [--steps 1000] [--push-velocity 0.5] [--mjcf XML] [--stochastic] [--obs-noise]
        [--lin-vel-x LOW HIGH] [--terrain-type stairs_down --terrain-row 9]

`--lin-vel-x` commands straight walks at speeds in that range (no lateral or turning command,
no standing); `--terrain-type` and `--terrain-row` put every env of a rough task on one type and
row of its grid.

Clean observations and the policy mean unless told otherwise (`--obs-noise --stochastic` is how the
policy acts in training), episodes from their start. Prints the termination counts by term, then one
line per early end: step, env, gravity in the base frame (which way it tipped) and the command.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch

from mjrl.checkpoint import load_checkpoint
from mjrl.tasks import load_task
from mjrl.tools.trained import load_trained


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="Mjrl-Velocity-Flat-Quadruped")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--push-velocity", type=float, default=0.5)
    parser.add_argument("--mjcf", default="", help="another MJCF for the robot (same names)")
    parser.add_argument("--stochastic", action="store_true", help="sample actions, as in training")
    parser.add_argument("--obs-noise", action="store_true", help="noisy actor observations, as in training")
    parser.add_argument("--lin-vel-x", type=float, nargs=2, help="straight walks at speeds in this range (m/s)")
    parser.add_argument("--terrain-type", default="", help="every env on this terrain type (rough tasks)")
    parser.add_argument("--terrain-row", type=int, default=-1, help="every env on this row (rough tasks)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    task = load_task(args.task)
    cfg = task.env_cfg
    robot = dataclasses.replace(cfg.robot, mjcf=args.mjcf) if args.mjcf else cfg.robot
    randomization = dataclasses.replace(cfg.randomization, push_velocity=args.push_velocity)
    cfg = dataclasses.replace(cfg, randomization=randomization, robot=robot)
    if args.lin_vel_x:
        straight = {"lin_vel_y": (0.0, 0.0), "yaw_rate": (0.0, 0.0), "heading": False, "standing_fraction": 0.0}
        commands = dataclasses.replace(cfg.commands, lin_vel_x=tuple(args.lin_vel_x), **straight)
        cfg = dataclasses.replace(cfg, commands=commands)
    if args.terrain_type or args.terrain_row >= 0:
        spawn = {"spawn_type": args.terrain_type, "spawn_row": args.terrain_row}
        cfg = dataclasses.replace(cfg, terrain=dataclasses.replace(cfg.terrain, **spawn))
    cfg = cfg.for_evaluation(args.num_envs, args.obs_noise)
    state = load_checkpoint(args.checkpoint)
    env, policy = load_trained(task, state, args.checkpoint, cfg, torch.device("cpu"), seed=5)
    critic_terms = env.obs_term_slices("critic")
    if not {"projected_gravity", "command"} <= critic_terms.keys():
        raise SystemExit("the task's critic observes no 'projected_gravity' or no 'command'")
    gravity, command = critic_terms["projected_gravity"], critic_terms["command"]
    env.pop_term_stats()
    ends = []
    with torch.no_grad():
        for step in range(args.steps):
            actor_obs = env.obs["actor"]
            if args.stochastic:
                actions = policy.distribution(policy.normalize_actor(actor_obs)).sample()
            else:
                actions = policy.act_deterministic(actor_obs)
            _, _, terminated, _, extras = env.step(actions)
            for i in terminated.nonzero().flatten().tolist():  # a host read per step: a probe, not training
                critic = extras["final_obs"]["critic"][i]
                ends.append((step, i, critic[gravity].tolist(), critic[command].tolist()))
    stats = {name: value.item() for name, value in env.pop_term_stats().items()}
    print({name: count for name, count in stats.items() if name.startswith("termination/")})
    for step, i, gravity, command in ends:
        tipped, asked = [round(g, 2) for g in gravity], [round(c, 2) for c in command]
        print(f"step {step:4d} env {i:3d} gravity {tipped} command {asked}")


if __name__ == "__main__":
    main()
