"""`mjrl buffers`' measurement (formerly `scripts/bench_train.py --check-buffers`): the most
contacts and constraint rows a task's worlds hold, against the buffers it allocates for them.

mujoco_warp allocates `nconmax` contacts per world, pooled over every world, and `njmax`
constraint rows per world, a hard limit of each; on overflow it prints a warning and drops
contacts. The peaks are recorded at every physics substep with generous buffers, under random
actions (std 1, like an untrained policy) and with every robot thrown onto the ground in a
random pose and nothing ending its episode (an upper bound for training).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from mjrl.envs import Task, VecEnv


def probe_sizes(sim: Any) -> tuple[int, int]:
    """The generous buffers the peaks are measured with: four times the task's, at least 64
    contacts and 256 rows per world."""
    return max(64, 4 * (sim.nconmax or 0)), max(256, 4 * (sim.njmax or 0))


def buffer_use(task: Task, env_cfg: Any, steps: int, tumble: bool, seed: int = 0) -> dict | None:
    """Peak contacts and constraint rows over `steps` env steps of random actions on the CPU
    (`env_cfg`'s envs, with the generous buffers of `probe_sizes`). With `tumble`, every robot
    starts thrown (`throw`) and nothing ends an episode, so robots lie and thrash on the ground;
    None for a robot without a free base to throw (a cart-pole, an arm)."""
    import mujoco_warp as mjw
    import warp as wp

    from mjrl.envs import VecEnv

    # No captured graph: its replay would skip the `_substeps` replaced below, leaving every peak at 0.
    nconmax, njmax = probe_sizes(env_cfg.sim)
    cfg = dataclasses.replace(env_cfg, sim=dataclasses.replace(env_cfg.sim, nconmax=nconmax, njmax=njmax, graph=False))
    spec = task.build(cfg)
    if tumble:
        cfg = dataclasses.replace(cfg, random_initial_episode_length=False, episode_length_s=steps)
        spec = dataclasses.replace(spec, terminations={})
    env, generator = VecEnv(cfg, spec, torch.device("cpu"), seed=seed), torch.Generator(device="cpu").manual_seed(seed)
    if tumble and (env.robot is None or env.robot.free_qpos is None):
        return None
    if tumble:
        throw(env, generator)
    data, num_envs = env.sim.data, cfg.num_envs
    worldid, nacon, nefc = wp.to_torch(data.contact.worldid), wp.to_torch(data.nacon), wp.to_torch(data.nefc)
    peak = torch.zeros(3, dtype=torch.long)  # per-world contacts, total contacts, per-world rows

    def substeps_with_stats() -> None:
        # Replaces Simulation._substeps on this instance only, to look at every substep.
        for _ in range(env.sim.cfg.decimation):
            mjw.step(env.sim.model, env.sim.data)
            valid = worldid[: int(nacon[0])].long()
            per_world = torch.bincount(valid, minlength=num_envs).max() if valid.numel() else torch.tensor(0)
            peak.copy_(torch.maximum(peak, torch.stack([per_world, nacon[0].long(), nefc.max().long()])))

    env.sim._substeps = substeps_with_stats
    for _ in range(steps):
        env.step(torch.randn(num_envs, env.num_actions, generator=generator))
    per_world, total, rows = peak.tolist()
    return {"max_contacts_in_a_world": per_world, "max_contacts_per_world_on_average": round(total / num_envs, 2),
            "max_constraint_rows_in_a_world": rows,
            "overflow_flags": int(wp.to_torch(data.overflow).max())}  # fmt: skip


def throw(env: VecEnv, generator: torch.Generator) -> None:
    """Every robot 0.065 m above its home height, in a random orientation, a random joint pose
    within the limits and random velocities."""
    n, sim, robot = env.num_envs, env.sim, env.robot
    quat = torch.randn(n, 4, generator=generator)
    low, high = robot.joint_lower, robot.joint_upper
    base = robot.free_qpos
    sim.qpos[:, base + 2] += 0.065
    sim.qpos[:, base + 3 : base + 7] = quat / quat.norm(dim=1, keepdim=True)
    sim.qpos[:, robot.joint_qpos] = low + (high - low) * torch.rand(n, low.shape[0], generator=generator)
    sim.qvel.copy_(torch.randn(n, sim.qvel.shape[1], generator=generator))


def verdict(peaks: dict, sim: Any) -> dict:
    """Whether `peaks` fit the buffers `sim` allocates (None where mujoco_warp sizes one itself),
    and whether the generous buffers held them (else the peaks are only lower bounds)."""
    contacts = None if sim.nconmax is None else peaks["max_contacts_per_world_on_average"] <= sim.nconmax
    rows = None if sim.njmax is None else peaks["max_constraint_rows_in_a_world"] <= sim.njmax
    return {"contacts_fit": contacts, "rows_fit": rows, "measured_whole": peaks["overflow_flags"] == 0}
