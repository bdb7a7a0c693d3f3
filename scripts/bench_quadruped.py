"""Speed of the Go1-class quadruped, and how full its contact and constraint buffers get.

    python scripts/bench_quadruped.py [--task NAME] [--num-envs 64] [--physics-steps 300] [--env-steps 100]
    python scripts/bench_quadruped.py [--task NAME] --check-buffers 500

Prints one JSON line with the bare physics rate (a loop of `mujoco_warp.step` on the standing
robot, after warm-up), the task's env steps/s (`VecEnv.step` with zero actions) and the
nconmax/njmax in use. Both rates take the best of three timed repeats, as other processes on a
small machine add noise.

`--check-buffers STEPS` also runs STEPS env steps of random actions (std 1, like an untrained
policy) with generous buffers and records, at every physics substep, the most contacts in one
world, the most contacts per world on average (the contact array is shared by all worlds)
and the most constraint rows in one world. It does so twice: as in training, and with every
robot thrown onto the ground in a random pose with terminations off (an upper bound).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

import torch

# mjrl.sim (also imported by mjrl.envs) quiets Warp's logging before mujoco_warp starts Warp,
# so mujoco_warp and warp are imported inside the functions below, after these lines have run.
from mjrl.envs import VecEnv
from mjrl.sim import SimConfig, Simulation
from mjrl.tasks import load_task

TASK = "Mjrl-Velocity-Flat-Quadruped"


def best_rate(run, repeats: int = 3) -> float:
    """The best of `repeats` calls of `run() -> (items, seconds)`, in items per second."""
    return max(items / seconds for items, seconds in (run() for _ in range(repeats)))


def bare_physics_rate(task, num_envs: int, steps: int) -> float:
    import mujoco_warp as mjw
    import warp as wp

    spec = task.build(task.env_cfg)
    sim = Simulation(spec.scene.build()[0], num_envs, "cpu", task.env_cfg.sim)
    home = torch.tensor(sim.mj_model.key("home").qpos, dtype=torch.float32)
    sim.qpos.copy_(home.expand_as(sim.qpos))
    sim.ctrl.copy_(home[7:].expand_as(sim.ctrl))

    def timed() -> tuple[int, float]:
        start = time.perf_counter()
        for _ in range(steps):
            mjw.step(sim.model, sim.data)
        return steps * num_envs, time.perf_counter() - start

    with wp.ScopedDevice(sim.wp_device):
        for _ in range(20):
            mjw.step(sim.model, sim.data)
        return best_rate(timed)


def env_rate(task, num_envs: int, steps: int) -> float:
    cfg = dataclasses.replace(task.env_cfg, num_envs=num_envs)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"))
    actions = torch.zeros(num_envs, env.num_actions)
    for _ in range(10):
        env.step(actions)

    def timed() -> tuple[int, float]:
        start = time.perf_counter()
        for _ in range(steps):
            env.step(actions)
        return steps * num_envs, time.perf_counter() - start

    return best_rate(timed)


def buffer_use(task, num_envs: int, steps: int, tumble: bool) -> dict:
    """Peak contacts and constraint rows over `steps` env steps of random actions. With `tumble`,
    every robot starts 0.35 m up in a random orientation and joint pose, and nothing ends an
    episode, so robots lie and thrash on the ground: an upper bound for training."""
    import mujoco_warp as mjw
    import warp as wp

    # Generous buffers: nothing overflows. No captured graph: its replay would skip the
    # `_substeps` replaced below, leaving every peak at 0.
    sim_cfg = dataclasses.replace(task.env_cfg.sim, nconmax=64, njmax=256, graph=False)
    cfg = dataclasses.replace(task.env_cfg, num_envs=num_envs, sim=sim_cfg)
    spec = task.build(cfg)
    if tumble:
        cfg = dataclasses.replace(cfg, random_initial_episode_length=False, episode_length_s=steps)
        spec = dataclasses.replace(spec, terminations={})
    env = VecEnv(cfg, spec, torch.device("cpu"))
    generator = torch.Generator().manual_seed(0)
    if tumble:
        throw(env, generator)
    data = env.sim.data
    worldid, nacon = wp.to_torch(data.contact.worldid), wp.to_torch(data.nacon)
    nefc = wp.to_torch(data.nefc)
    peak = torch.zeros(3, dtype=torch.long)  # per-world contacts, total contacts, per-world rows

    def substeps_with_stats() -> None:
        # Replaces Simulation._substeps on this instance only, to look at every substep.
        for _ in range(env.sim.cfg.decimation):
            mjw.step(env.sim.model, env.sim.data)
            valid = worldid[: int(nacon[0])].long()
            per_world = torch.bincount(valid, minlength=num_envs).max() if valid.numel() else torch.tensor(0)
            now = torch.stack([per_world, nacon[0].long(), nefc.max().long()])
            peak.copy_(torch.maximum(peak, now))

    env.sim._substeps = substeps_with_stats
    for _ in range(steps):
        env.step(torch.randn(num_envs, env.num_actions, generator=generator))
    per_world, total, rows = peak.tolist()
    return {
        "max_contacts_in_a_world": per_world,
        "max_contacts_per_world_on_average": round(total / num_envs, 2),
        "max_constraint_rows_in_a_world": rows,
        "overflow_flags": int(wp.to_torch(data.overflow).max()),
    }


def throw(env: VecEnv, generator: torch.Generator) -> None:
    """Every robot 0.065 m above its home height (0.35 m for the Go1 on flat ground), in a random
    orientation and a random joint pose within the limits."""
    n, sim = env.num_envs, env.sim
    quat = torch.randn(n, 4, generator=generator)
    low, high = env.robot.joint_lower, env.robot.joint_upper
    sim.qpos[:, 2] += 0.065
    sim.qpos[:, 3:7] = quat / quat.norm(dim=1, keepdim=True)
    sim.qpos[:, 7:] = low + (high - low) * torch.rand(n, 12, generator=generator)
    sim.qvel.copy_(torch.randn(n, sim.qvel.shape[1], generator=generator))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default=TASK, help="a velocity task (default: %(default)s)")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--physics-steps", type=int, default=300)
    parser.add_argument("--env-steps", type=int, default=100)
    parser.add_argument("--check-buffers", type=int, default=0, metavar="STEPS")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as `train` does on the CPU
    task = load_task(args.task)
    sim_cfg: SimConfig = task.env_cfg.sim
    result = {
        "task": args.task,
        "num_envs": args.num_envs,
        "nconmax": sim_cfg.nconmax,
        "njmax": sim_cfg.njmax,
        "bare_physics_steps_per_s": round(bare_physics_rate(task, args.num_envs, args.physics_steps)),
        "env_steps_per_s": round(env_rate(task, args.num_envs, args.env_steps)),
        "decimation": sim_cfg.decimation,
    }
    if args.check_buffers:
        for tumble in (False, True):
            key = "buffers_random_actions" + ("_tumbling" if tumble else "")
            result[key] = buffer_use(task, args.num_envs, args.check_buffers, tumble)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
