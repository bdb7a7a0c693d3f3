"""The velocity task's own reward terms that need no gait clock: velocity tracking, the foot
terms read from `LeggedState` (air time, slip, clearance, single stance, tilt) and the
command-dependent posture. The gait clock's rewards are in `gait.py`; the generic ones in
`mjrl.envs.terms`.
"""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import base_ang_vel, base_lin_vel, joint_pos_rel, per_joint_values
from mjrl.errors import UsageError
from mjrl.tasks.velocity.commands import is_moving_command, velocity_command
from mjrl.tasks.velocity.state import feet


def track_lin_vel(env: VecEnv, sigma: float) -> torch.Tensor:
    """exp(-|v_xy - command_xy|^2 / sigma), in the base frame."""
    error = torch.sum((velocity_command(env)[:, :2] - env.cached(base_lin_vel)[:, :2]) ** 2, dim=1)
    return torch.exp(error / -sigma)


def track_yaw_rate(env: VecEnv, sigma: float) -> torch.Tensor:
    """exp(-(w_z - command_yaw)^2 / sigma)."""
    error = (velocity_command(env)[:, 2] - base_ang_vel(env)[:, 2]) ** 2
    return torch.exp(error / -sigma)


def feet_air_time(env: VecEnv, threshold: float) -> torch.Tensor:
    """Sum over the feet that touched down of (swing time - threshold); 0 for a ~zero command,
    so standing still is not punished for keeping its feet down."""
    landing = feet(env).landing_air_time
    per_foot = (landing - threshold) * (landing > 0)
    return per_foot.sum(dim=1) * env.cached(is_moving_command)


def feet_slip(env: VecEnv) -> torch.Tensor:
    """Sum over feet on the ground of their squared horizontal speed, while commanded to move."""
    state = feet(env)
    return torch.sum(state.speed**2 * state.contacts, dim=1) * env.cached(is_moving_command)


def feet_clearance(env: VecEnv, height: float) -> torch.Tensor:
    """Sum over feet of |height - target| times horizontal speed, while commanded to move."""
    state = feet(env)
    return torch.sum((state.height - height).abs() * state.speed, dim=1) * env.cached(is_moving_command)


def feet_single_stance(env: VecEnv, threshold: float) -> torch.Tensor:
    """While commanded to move and exactly one foot is on the ground: how long the foot that
    changed phase last has been in its phase (stance or swing), capped at `threshold` (s); else
    0. It pays a biped for stepping one foot at a time, and for steps of at least `threshold`
    (Isaac Lab's biped air-time term)."""
    state = feet(env)
    stance = state.contact_time > 0
    phase_time = torch.where(stance, state.contact_time, state.air_time)
    single = stance.sum(dim=1) == 1
    return phase_time.min(dim=1).values.clamp(max=threshold) * single * env.cached(is_moving_command)


def feet_tilt(env: VecEnv) -> torch.Tensor:
    """Sum over feet of the squared horizontal components of gravity in the foot's frame: 0 for
    soles parallel to level ground (flat feet land flat and push off flat). For feet whose
    geom's local z is the sole's normal (boxes); it means nothing for spheres."""
    axes_z = env.sim.geom_xmat.index_select(1, env.robot.foot_geoms)[..., 2, :2]  # z of the feet's x, y axes
    return torch.sum(axes_z**2, dim=(1, 2))


class Posture:
    """exp(-mean over the actuated joints of ((q - q_home) / std)^2): 1 at the home pose. While
    told to stand every joint has `standing_std`; while moving each has the std of the first
    `walking_std` pattern its name matches (shell-style), looser for the joints a gait swings
    (mjlab's variable posture)."""

    def __init__(self, standing_std: float, walking_std: tuple[tuple[str, float], ...]):
        self.standing_std, self.walking_std = standing_std, walking_std
        self._walking: torch.Tensor | None = None

    def _walking_stds(self, env: VecEnv) -> torch.Tensor:
        stds = per_joint_values(env, self.walking_std)
        for column, name in enumerate(env.sim.actuator_joints()):
            if column not in stds:
                raise UsageError(f"--env.rewards.posture-std-walking has no pattern for the joint {name!r}: add one")
        return torch.tensor([stds[column] for column in range(len(stds))], device=env.device)

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._walking is None:
            self._walking = self._walking_stds(env)
        moving = env.cached(is_moving_command).unsqueeze(1)
        std = torch.where(moving, self._walking, self.standing_std)
        return torch.exp(-torch.mean((joint_pos_rel(env) / std) ** 2, dim=1))
