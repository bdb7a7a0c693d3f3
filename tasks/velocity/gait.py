"""A reference gait and what is built on it: `GaitClock` (each foot's stance and swing phase,
its observation and mirror, the reference swing of the joints and its feedforward) and the
rewards that follow it: the contact match (`feet_gait`), the load on swinging feet
(`SwingFootLoad`, read from touch sensors) and the joint reference (`gait_joints`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import mujoco
import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import joint_pos_rel, mirror_signs, per_joint_values
from mjrl.errors import UsageError
from mjrl.tasks.velocity.commands import MOVING_COMMAND, is_moving_command
from mjrl.tasks.velocity.state import feet

if TYPE_CHECKING:
    from mjrl.tasks.velocity.config import GaitConfig


@dataclasses.dataclass
class GaitClock:
    """A reference gait: a phase running from 0 to 1 every `period_s` of the episode, and for
    each foot a stance phase of `stance_fraction` of the cycle starting at its offset. It is the
    same in every episode at the same time, so the policy reads it from its observation.

    `swing_joint_offsets` (shell-style joint name patterns and offsets from home, rad) give the
    legs a reference swing: each such joint moves with the foot below it in the kinematic tree,
    home + offset * sin(pi * swing progress) while that foot swings, home otherwise."""

    period_s: float
    stance_fraction: float
    foot_offsets: tuple[float, ...]
    swing_joint_offsets: tuple[tuple[str, float], ...] = ()
    paid_joints: tuple[str, ...] = ("*",)
    _offsets: torch.Tensor | None = None
    _swing: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    _paid: torch.Tensor | None = None

    @classmethod
    def of(cls, gait: GaitConfig) -> GaitClock:
        return cls(
            gait.period_s, gait.stance_fraction, gait.foot_phase_offsets, gait.swing_joint_offsets, gait.paid_joints
        )

    def phase(self, env: VecEnv) -> torch.Tensor:
        """(n,): the phase of the cycle, in [0, 1)."""
        return torch.remainder(env.episode_length * (env.step_dt / self.period_s), 1.0)

    def observation(self, env: VecEnv) -> torch.Tensor:
        """(n, 2): sin and cos of 2 pi phase, continuous over the cycle's end."""
        angle = (2 * math.pi) * self.phase(env)
        return torch.stack([torch.sin(angle), torch.cos(angle)], dim=1)

    def foot_phase(self, env: VecEnv) -> torch.Tensor:
        """(n, feet): where each foot is in its own cycle, 0 at the start of its stance."""
        if self._offsets is None:
            self._offsets = torch.tensor(self.foot_offsets, device=env.device)
        return torch.remainder(self.phase(env).unsqueeze(1) - self._offsets, 1.0)

    def in_stance(self, env: VecEnv) -> torch.Tensor:
        """(n, feet) bool: which feet the reference gait has on the ground."""
        return self.foot_phase(env) < self.stance_fraction

    def swing_joints(self, env: VecEnv) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The joints `swing_joint_offsets` name (action columns), the foot each moves with,
        and their offsets at mid-swing."""
        if self._swing is None:
            self._swing = _swing_joints(env, self.swing_joint_offsets)
        return self._swing

    def paid_swing_joints(self, env: VecEnv) -> torch.Tensor:
        """(swing joints,) bool: which of `swing_joints` `paid_joints` names."""
        if self._paid is None:
            columns = self.swing_joints(env)[0].tolist()
            named = per_joint_values(env, tuple((pattern, 1.0) for pattern in self.paid_joints))
            if not named.keys() & set(columns):
                names = [env.sim.actuator_joints()[column] for column in columns]
                raise UsageError(f"--env.gait.paid-joints match none of the swing joints {names}")
            self._paid = torch.tensor([column in named for column in columns], device=env.device)
        return self._paid

    def swing_reference(self, env: VecEnv) -> torch.Tensor:
        """(n, swing joints): the reference offsets from home of `swing_joints`, 0 while told
        to stand."""
        _, foot, amplitude = self.swing_joints(env)
        progress = (self.foot_phase(env).index_select(1, foot) - self.stance_fraction) / (1 - self.stance_fraction)
        lift = torch.sin(math.pi * progress.clamp(min=0))  # 0 in stance
        return amplitude * lift * env.cached(is_moving_command).unsqueeze(1)

    def feedforward(self, env: VecEnv) -> torch.Tensor:
        """(n, num_actions): the reference swing as offsets of the joint targets (rad), 0 for
        the joints it does not name."""
        columns, _, _ = self.swing_joints(env)
        offsets = torch.zeros(env.num_envs, env.num_actions, device=env.device)
        return offsets.index_add_(1, columns, self.swing_reference(env))

    def deployment(self, env: VecEnv) -> dict:
        """`feedforward` for an exported policy's sidecar: the parameters and the formula a
        robot-side runtime computes it with, from its own clock and command."""
        columns, feet, amplitudes = self.swing_joints(env)
        names = env.sim.actuator_joints()
        return {
            "kind": "reference_swing",
            "formula": (
                "target[action] += amplitude * sin(pi * max(0, (foot_phase - stance_fraction) / "
                "(1 - stance_fraction))) while the command asks for motion (max(|(vx, vy)|, |yaw rate|) > "
                "moving_threshold), else 0; foot_phase = (t / period_s - foot_phase_offset) mod 1, t the "
                "time since the episode started at the step the policy acts (the gait_clock observation is "
                "sin and cos of 2 pi t / period_s)"
            ),
            "period_s": self.period_s,
            "stance_fraction": self.stance_fraction,
            "moving_threshold": MOVING_COMMAND,
            "joints": [
                {"action": c, "joint": names[c], "foot_phase_offset": self.foot_offsets[f], "amplitude": a}
                for c, f, a in zip(columns.tolist(), feet.tolist(), amplitudes.tolist(), strict=True)
            ],
        }


def _swing_joints(env: VecEnv, offsets: tuple[tuple[str, float], ...]) -> tuple[torch.Tensor, ...]:
    model = env.sim.mj_model

    def ancestors(body: int) -> set[int]:
        chain = {body}
        while body > 0:
            body = int(model.body_parentid[body])
            chain.add(body)
        return chain

    foot_chains = [ancestors(int(model.geom_bodyid[g])) for g in env.robot.foot_geoms.tolist()]
    names, amplitudes = env.sim.actuator_joints(), per_joint_values(env, offsets)
    if not amplitudes:
        raise UsageError(f"--env.gait.swing-joint-offsets match none of the joints {names}")
    feet = []
    for column in amplitudes:
        name = names[column]
        body = int(model.jnt_bodyid[model.joint(name).id])
        below = [k for k, chain in enumerate(foot_chains) if body in chain]
        if len(below) != 1:
            raise UsageError(f"--env.gait.swing-joint-offsets names {name!r}, which moves {len(below)} feet, not 1")
        feet.append(below[0])
    return tuple(
        torch.tensor(values, device=env.device) for values in (list(amplitudes), feet, list(amplitudes.values()))
    )


mirror_gait_clock = mirror_signs(-1, -1)
"""The mirror image of a gait is the same gait half a period on, when mirrored feet are offset by
half a period: sin and cos of the phase change sign."""


def feet_gait(env: VecEnv, clock: GaitClock) -> torch.Tensor:
    """Number of feet whose contact matches the reference gait while commanded to move (down in
    stance, up in swing), or that are down while told to stand."""
    moving = env.cached(is_moving_command).unsqueeze(1)
    should_touch = clock.in_stance(env) | ~moving
    return (feet(env).contacts == should_touch).sum(dim=1).float()


class SwingFootLoad:
    """Sum over the feet the reference gait has in swing, while commanded to move, of the normal
    force on each (its `touch` sensor) over the robot's weight. The contact match (`feet_gait`)
    pays only once a foot is off the ground; this pays as soon as the weight shifts off the foot
    about to swing (the swing half of Siekmann et al.'s periodic reward, 2021)."""

    def __init__(self, clock: GaitClock):
        self.clock = clock
        self._columns: torch.Tensor | None = None
        self._weight = 1.0

    def __call__(self, env: VecEnv) -> torch.Tensor:
        if self._columns is None:
            self._columns = foot_touch_columns(env)
            model = env.sim.mj_model
            self._weight = float(model.body_subtreemass[env.robot.base_body]) * float(-model.opt.gravity[2])
        load = env.sim.sensordata.index_select(1, self._columns) / self._weight
        swinging = ~self.clock.in_stance(env) & env.cached(is_moving_command).unsqueeze(1)
        return torch.sum(load * swinging, dim=1)


def foot_touch_columns(env: VecEnv) -> torch.Tensor:
    """Per foot, the `sensordata` column of the touch sensor on a site of the foot geom's body."""
    model = env.sim.mj_model
    touch_body = {
        int(model.site_bodyid[model.sensor_objid[k]]): int(model.sensor_adr[k])
        for k in range(model.nsensor)
        if model.sensor_type[k] == mujoco.mjtSensor.mjSENS_TOUCH
    }
    columns = []
    for geom in env.robot.foot_geoms.tolist():
        body = int(model.geom_bodyid[geom])
        if body not in touch_body:
            raise UsageError(
                f"the feet_swing_load reward needs a touch sensor on each foot: add a site enclosing the "
                f'geom {model.geom(geom).name!r} and <sensor><touch site="..."/></sensor> to the robot\'s '
                "MJCF; or set its weight to 0"
            )
        columns.append(touch_body[body])
    return torch.tensor(columns, device=env.device)


def gait_joints(env: VecEnv, clock: GaitClock) -> torch.Tensor:
    """exp(-2 |q - q_ref|) over the swing reference's joints, q_ref their reference: 1 on the
    reference swing (Humanoid-Gym's joint reference term). Unlike the contacts, it grows as a leg
    starts to bend, before its foot leaves the ground. While moving it counts only the joints
    the clock pays for (`paid_swing_joints`: the others make the stride); told to stand, every
    swing joint's reference is home and counts."""
    columns, _, _ = clock.swing_joints(env)
    error = joint_pos_rel(env).index_select(1, columns) - clock.swing_reference(env)
    counted = clock.paid_swing_joints(env) | ~env.cached(is_moving_command).unsqueeze(1)
    return torch.exp(-2 * torch.linalg.vector_norm(error * counted, dim=1))
