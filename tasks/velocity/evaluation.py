"""The velocity task's evaluation figures: `play_metrics` (tracking errors, contacts, swing
times, displacement and on a terrain grid travel distance and success) and the episode-end
event that records each finished episode's displacement for it.
"""

from __future__ import annotations

import torch

from mjrl.envs import VecEnv
from mjrl.envs.terms import base_ang_vel, base_lin_vel, base_position
from mjrl.tasks.velocity.commands import velocity_command
from mjrl.tasks.velocity.state import feet


def record_displacement(env: VecEnv, ended: torch.Tensor) -> None:
    """Episode-end event: how far each finished episode's base got from where it began (for
    evaluation: a robot told to stand should not drift)."""
    state = feet(env)
    distance = torch.linalg.vector_norm(base_position(env)[:, :2] - state.start_xy, dim=1)
    torch.mul(distance, ended, out=state.displacement)


def play_metrics(env: VecEnv) -> dict[str, torch.Tensor]:
    """Per-env command tracking errors and gait figures at the current state, for evaluation.

    Contract: call after `env.step` (or `env.reset`); returns (num_envs,) float tensors on
    `env.device`, computed without any host synchronisation:
      - "lin_vel_error": |command_xy - v_xy| (m/s), the norm of the planar velocity error in the
        base frame;
      - "yaw_rate_error": |command_yaw - w_z| (rad/s);
      - "foot_contact_fraction": the share of feet on the ground;
      - "swing_time_total" and "swing_time_count": the summed swing times of the feet that
        touched down this step, and their number (their ratio is the mean swing time);
      - the same per foot, for gait symmetry: "foot_contact_fraction/<foot geom>" (1 or 0) and
        "swing_time/<foot geom>_total" with its "_count";
      - per episode that ended this step, "displacement_total" (how far the base ended from
        where it began, m) with its "_count";
      - on a terrain grid, per episode that ended this step: "travel_distance_total" (how far it
        ended from its patch's centre, m) and "success_total" (1 when that is at least half a
        patch and the episode was not terminated), each with its "_count" of episodes.
    These are instantaneous values; the caller averages them over steps and envs. For envs that
    just finished, they describe the first state of the new episode (as `obs` does).
    """
    cmd = velocity_command(env)
    lin = torch.linalg.vector_norm(cmd[:, :2] - env.cached(base_lin_vel)[:, :2], dim=1)
    yaw = (cmd[:, 2] - base_ang_vel(env)[:, 2]).abs()
    state = feet(env)
    landing = state.landing_air_time
    figures = {
        "lin_vel_error": lin,
        "yaw_rate_error": yaw,
        "foot_contact_fraction": state.contacts.float().mean(dim=1),
        "swing_time_total": landing.sum(dim=1),
        "swing_time_count": (landing > 0).sum(dim=1).float(),
    }
    for i, foot in enumerate(env.cfg.robot.foot_geoms):
        figures[f"foot_contact_fraction/{foot}"] = state.contacts[:, i].float()
        figures[f"swing_time/{foot}_total"] = landing[:, i]
        figures[f"swing_time/{foot}_count"] = (landing[:, i] > 0).float()
    ended = (env.episode_length == 0).float()  # reset this step
    figures["displacement_total"] = state.displacement  # 0 but for the episodes that ended
    figures["displacement_count"] = ended
    if env.terrain is not None:
        distance = env.terrain.last_distance
        success = (distance >= env.terrain.cfg.patch_size / 2) & ~env.terminated
        figures |= {
            "travel_distance_total": distance * ended,
            "travel_distance_count": ended,
            "success_total": success.float() * ended,
            "success_count": ended,
        }
    return figures
