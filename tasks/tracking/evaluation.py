"""The tracking task's figures: how far the robot is from the reference, per step, for `play`
(`play_metrics`) and, per tracked body, in `metrics.jsonl` (`TrackingGauges`).

- joint_pos_error: mean over the actuated joints of |q - q_ref| (rad);
- body_pos_error: mean over the tracked bodies of their distance to the relative reference's
  (m; relative to the anchor, BeyondMimic's "body position error");
- anchor_pos_error: the anchor's distance to the reference's in the world (m);
- foot_slide (play): the horizontal speed of feet on the ground (m/s), per foot in contact.
"""

from __future__ import annotations

import torch

from mjrl.envs import EnvComponent, VecEnv
from mjrl.tasks.tracking.reference import (
    library,
    reference,
    reference_anchor,
    relative_reference,
    robot_anchor,
    robot_bodies,
)


def tracking_errors(env: VecEnv) -> dict[str, torch.Tensor]:
    """(num_envs,) errors of the current state, and "body_pos_error/bodies" (num_envs, bodies)."""
    joints = env.sim.qpos[:, env.robot.joint_qpos]
    target, _ = env.cached(relative_reference)
    pos, _ = env.cached(robot_bodies)
    per_body = torch.linalg.vector_norm(target - pos, dim=2)
    robot_pos, _ = env.cached(robot_anchor)
    ref_pos, _ = env.cached(reference_anchor)
    return {
        "joint_pos_error": (joints - reference(env).joint_pos).abs().mean(dim=1),
        "body_pos_error": per_body.mean(dim=1),
        "anchor_pos_error": torch.linalg.vector_norm(ref_pos - robot_pos, dim=1),
        "body_pos_error/bodies": per_body,
    }


def play_metrics(env: VecEnv) -> dict[str, torch.Tensor]:
    """Per-env errors for `play` (averaged over every evaluated step), per body too, and the
    feet's sliding: "foot_slide_total" over "foot_slide_count" feet on the ground."""
    errors = tracking_errors(env)
    per_body = errors.pop("body_pos_error/bodies")
    figures = dict(errors)
    for i, name in enumerate(env.cfg.motion.bodies):
        figures[f"body_pos_error/{name}"] = per_body[:, i]
    feet = [env.cfg.motion.bodies.index(b) for b in _foot_bodies(env)]
    if feet:
        on_ground = env.contacts.index_select(1, env.robot.foot_geoms).float()
        speed = torch.linalg.vector_norm(library(env).body_lin_vel[:, feet, :2], dim=2)
        figures["foot_slide_total"] = (speed * on_ground).sum(dim=1)
        figures["foot_slide_count"] = on_ground.sum(dim=1)
    return figures


def _foot_bodies(env: VecEnv) -> list[str]:
    """The tracked bodies that carry the robot's foot geoms, in `foot_geoms` order."""
    model = env.sim.mj_model
    names = [model.body(int(model.geom_bodyid[model.geom(g).id])).name for g in env.cfg.robot.foot_geoms]
    return names if all(name in env.cfg.motion.bodies for name in names) else []


class TrackingGauges(EnvComponent):
    """Every step's tracking errors summed over the envs, for `metrics.jsonl` as means since the
    last iteration: `tracking/<error>` and `tracking/body_pos_error/<body>`."""

    def __init__(self, env: VecEnv) -> None:
        bodies = env.cfg.motion.bodies
        self.names = [
            "tracking/joint_pos_error",
            "tracking/body_pos_error",
            "tracking/anchor_pos_error",
            *(f"tracking/body_pos_error/{b}" for b in bodies),
        ]
        self.sums = torch.zeros(len(self.names), dtype=torch.float64, device=env.device)
        self.count = torch.zeros((), dtype=torch.float64, device=env.device)

    def update(self, env: VecEnv) -> None:
        errors = tracking_errors(env)
        per_body = errors.pop("body_pos_error/bodies")
        means = torch.cat([torch.stack(list(errors.values()), dim=1), per_body], dim=1)
        self.sums += means.sum(dim=0).double()
        self.count += env.num_envs

    def gauges(self) -> dict[str, torch.Tensor]:
        out = {
            name: torch.stack([total, self.count]) for name, total in zip(self.names, self.sums.unbind(), strict=True)
        }
        self.sums.zero_()
        self.count.zero_()
        return out
