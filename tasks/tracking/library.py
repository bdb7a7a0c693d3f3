"""The reference motions on the device, each env's place in them, and where episodes start.

`MotionLibrary` is an env component (`mjrl.envs.component`): the clips of every motion file laid
end to end in one set of tensors, per env the frame its reference is at (where its episode
started plus the steps taken, held at the clip's last frame), and the current reference gathered
once per step into tensors the terms read. At a reset it draws each env's clip and start frame
and puts the robot in the reference's state there, perturbed (`ResetNoiseConfig`).

Where episodes start (`MotionConfig.start`): BeyondMimic's adaptive draw splits every clip into
bins of `bin_s` and draws a bin in proportion to how often episodes have recently failed in it
(an average over env steps, `failure_rate`), plus a uniform share; a failure also counts for the
`kernel_bins - 1` bins before it, so episodes start a little ahead of the hard part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from mjrl.envs import EnvComponent, VecEnv
from mjrl.envs.terms import masked_write, quat_apply_inverse, quat_mul
from mjrl.errors import UsageError
from mjrl.motion import Motion, RobotKinematics, load_motion
from mjrl.tasks.tracking.config import MotionConfig, ResetNoiseConfig, TrackingEnvConfig

LOCKED_JOINT_TOLERANCE = 0.05  # rad a motion may move a joint the task locks


@dataclass
class Reference:
    """The reference at each env's current frame (num_envs first), written in place every step."""

    joint_pos: torch.Tensor
    """(n, joints) in action order."""
    joint_vel: torch.Tensor
    body_pos: torch.Tensor
    """(n, bodies, 3) world positions of the tracked bodies."""
    body_quat: torch.Tensor
    """(n, bodies, 4) world orientations, w x y z."""
    body_lin_vel: torch.Tensor
    body_ang_vel: torch.Tensor


class MotionLibrary(EnvComponent):
    """Every motion's frames, each env's clip and frame, and the draw of start frames."""

    def __init__(self, env: VecEnv, motions: list[Motion], cfg: MotionConfig, noise: ResetNoiseConfig) -> None:
        """`motions` as `validate_motions` loaded and checked them when the task was built."""
        self.cfg, self.device = cfg, env.device
        model = env.sim.mj_model
        body_ids = [model.body(name).id for name in cfg.bodies]
        self.anchor = cfg.bodies.index(cfg.anchor_body)
        effectors = [cfg.bodies.index(b) for b in cfg.end_effectors]
        self.end_effectors = torch.tensor(effectors, dtype=torch.long, device=env.device)
        self.body_root = torch.tensor(model.body_rootid[body_ids], device=env.device)
        self.body_ids = torch.tensor(body_ids, device=env.device)
        """The tracked bodies' ids in the model, in `MotionConfig.bodies` order."""
        frames = [_frames(motion, env, cfg.bodies) for motion in motions]
        self.frames = {key: torch.cat([f[key] for f in frames]).to(env.device) for key in frames[0]}
        lengths = [motion.num_frames for motion in motions]
        self.fps = motions[0].fps
        self._init_bins(lengths)
        n = env.num_envs
        self.start = torch.zeros(n, dtype=torch.long, device=env.device)
        """Each env's episode's first frame (an index into the frames of all clips)."""
        self.last = torch.zeros(n, dtype=torch.long, device=env.device)
        """Each env's clip's last frame."""
        self.frame = torch.zeros(n, dtype=torch.long, device=env.device)
        """Each env's current frame: `start` plus the steps taken, at most `last`."""
        self.reference = Reference(
            **{key: torch.zeros((n, *self.frames[key].shape[1:]), device=env.device) for key in _GATHERED}
        )
        bodies = len(body_ids)
        self.body_lin_vel = torch.zeros(n, bodies, 3, device=env.device)
        """The robot's tracked bodies' world linear velocities (at each body's origin)."""
        self.body_ang_vel = torch.zeros(n, bodies, 3, device=env.device)
        self._noise_scale = _noise_scale(noise, env.num_actions, env.device)
        self._env_index = torch.arange(n, device=env.device)

    def _init_bins(self, lengths: list[int]) -> None:
        """Bins of `bin_s` over each clip's startable frames (all but its last)."""
        per_bin = max(1, round(self.cfg.bin_s * self.fps))
        first, sizes, clip_last, clip_first_bins, offset = [], [], [], [], 0
        for length in lengths:
            clip_first_bins.append(len(first))
            for start in range(0, length - 1, per_bin):
                first.append(offset + start)
                sizes.append(min(per_bin, length - 1 - start))
                clip_last.append(offset + length - 1)
            offset += length
        device = self.device
        self.bin_first = torch.tensor(first, device=device)
        self.bin_size = torch.tensor(sizes, device=device)
        self.bin_last = torch.tensor(clip_last, device=device)
        """Per bin, the last frame of its clip."""
        bins = torch.full((offset,), len(first) - 1, dtype=torch.long)
        for b, (start, size) in enumerate(zip(first, sizes, strict=True)):
            bins[start : start + size + 1] = b  # a clip's last frame counts as its last bin
        self.frame_bin = bins.to(device)
        self.failures = torch.zeros(len(first), device=device)
        """Per bin, the average over env steps of the episodes failing in it."""
        self.step_failures = torch.zeros(len(first), device=device)
        self.uniform_weights = self.bin_size.float() / self.bin_size.sum()
        # A failure in bin b counts decay^k for bin b - k (k < kernel_bins), within its clip.
        k = torch.arange(self.cfg.kernel_bins, device=device)
        self.kernel = self.cfg.kernel_decay**k
        self.first_clip_bins = torch.tensor(clip_first_bins, device=device, dtype=torch.long)
        """Each clip's first bin."""

    # ------------------------------------------------------------------------- component

    def update(self, env: VecEnv) -> None:
        """The frame follows the episode's steps; the reference and the robot's body velocities
        are read once for every term; body poses are brought up to date with the state."""
        torch.clamp(self.start + env.episode_length, max=self.last, out=self.frame)
        self._gather()
        self._body_velocities(env)
        # After a physics step the bodies' poses are those of its last substep's start (5 ms
        # old); the tracked errors compare them with the reference of now.
        env.sim.kinematics()
        rate = self.cfg.failure_rate
        self.failures.mul_(1.0 - rate).add_(self.step_failures, alpha=rate)
        self.step_failures.zero_()

    def reset(self, env: VecEnv, mask: torch.Tensor) -> None:
        """Draw the reset envs' start frames and put their robots in the reference's state there."""
        bins = self._draw_bins(env)
        offset = (torch.rand(env.num_envs, device=env.device, generator=env.generator) * self.bin_size[bins]).long()
        if self.cfg.start == "first":
            offset.zero_()
        torch.where(mask, self.bin_first[bins] + offset, self.start, out=self.start)
        torch.where(mask, self.bin_last[bins], self.last, out=self.last)
        torch.where(mask, self.start, self.frame, out=self.frame)
        self._gather()
        self._write_state(env, mask)

    def record_failures(self, env: VecEnv, ended: torch.Tensor) -> None:
        """Episode-end event: count the failed episodes (terminated, not timed out) in the bin of
        the frame where they failed."""
        failed = (ended & env.terminated).float()
        self.step_failures.scatter_add_(0, self.frame_bin[self.frame], failed)

    def resume_state(self) -> dict[str, torch.Tensor]:
        """The failure averages of the adaptive draw, so that a resumed run draws as it did."""
        return {"motion_bin_failures": self.failures.clone()}

    def load_resume_state(self, saved: Mapping[str, torch.Tensor]) -> bool:
        failures = saved.get("motion_bin_failures")
        if failures is not None and failures.shape == self.failures.shape:
            self.failures.copy_(failures)
        return False

    # ---------------------------------------------------------------------------- draws

    def _draw_bins(self, env: VecEnv) -> torch.Tensor:
        """A bin per env (every env draws; the caller keeps the reset ones')."""
        if self.cfg.start == "first":  # clips in turn over the envs, from their first frame
            return self.first_clip_bins[self._env_index % len(self.first_clip_bins)]
        if self.cfg.start == "uniform":
            weights = self.uniform_weights
        else:
            weights = self._failure_weights() + self.cfg.uniform_share / len(self.failures)
        return torch.multinomial(weights, env.num_envs, replacement=True, generator=env.generator)

    def _failure_weights(self) -> torch.Tensor:
        """Each bin's failures, and decayed those of the bins after it in its clip."""
        weights = self.failures.clone()
        for k in range(1, self.cfg.kernel_bins):
            later = torch.zeros_like(weights)
            later[:-k] = self.failures[k:] * (self.bin_last[:-k] == self.bin_last[k:])
            weights += self.kernel[k] * later
        return weights

    # ---------------------------------------------------------------------------- state

    def _gather(self) -> None:
        for key in _GATHERED:
            torch.index_select(self.frames[key], 0, self.frame, out=getattr(self.reference, key))

    def _body_velocities(self, env: VecEnv) -> None:
        """World velocities at the tracked bodies' origins from MuJoCo's com-based `cvel` (its
        linear part is the velocity of the point at the subtree's centre of mass)."""
        sim = env.sim
        cvel = sim.cvel.index_select(1, self.body_ids)
        arm = sim.xpos.index_select(1, self.body_ids) - sim.subtree_com.index_select(1, self.body_root)
        self.body_ang_vel.copy_(cvel[..., :3])
        torch.add(cvel[..., 3:], torch.linalg.cross(cvel[..., :3], arm, dim=-1), out=self.body_lin_vel)

    def _write_state(self, env: VecEnv, mask: torch.Tensor) -> None:
        """The reset envs' robots at their reference frame's root pose, root velocity and
        joints, each perturbed by `ResetNoiseConfig`."""
        frames, f = self.frames, self.frame
        draw = _uniform(env, 3 + 3 + 3 + 3 + env.num_actions) * self._noise_scale
        root_pos = frames["root_pos"][f] + draw[:, 0:3]
        half = 0.5 * draw[:, 3:6]
        turn = _quat_from_small_angles(half)
        root_quat = quat_mul(turn, frames["root_quat"][f])
        lin = frames["root_lin_vel"][f] + draw[:, 6:9]
        ang_world = frames["root_ang_vel"][f] + draw[:, 9:12]
        joints = (self.reference.joint_pos + draw[:, 12:]).clamp(env.robot.joint_lower, env.robot.joint_upper)
        qpos, qvel = env.sim.qpos.clone(), env.sim.qvel.clone()
        base, dof = env.robot.base_qpos, env.robot.base_dof
        qpos[:, base : base + 3], qpos[:, base + 3 : base + 7] = root_pos, root_quat
        qpos[:, env.robot.joint_qpos] = joints
        # The free joint's angular velocity is in the body's frame.
        qvel[:, dof : dof + 3], qvel[:, dof + 3 : dof + 6] = lin, quat_apply_inverse(root_quat, ang_world)
        qvel[:, env.robot.joint_dof] = self.reference.joint_vel
        masked_write(mask, qpos, env.sim.qpos)
        masked_write(mask, qvel, env.sim.qvel)


_GATHERED = ("joint_pos", "joint_vel", "body_pos", "body_quat", "body_lin_vel", "body_ang_vel")


def _noise_scale(noise: ResetNoiseConfig, joints: int, device: torch.device) -> torch.Tensor:
    """Half-widths of the reset's draws: root position (a tenth vertically), rotation (twice about
    the vertical; as half-angles below), root velocities, joints."""
    n = noise
    scales = [n.position, n.position, 0.1 * n.position, n.rotation, n.rotation, 2 * n.rotation]
    scales += [n.linear_velocity] * 3 + [n.angular_velocity] * 3 + [n.joint_pos] * joints
    return torch.tensor(scales, device=device)


def _uniform(env: VecEnv, width: int) -> torch.Tensor:
    """(n, width) uniform draws in [-1, 1]."""
    return 2.0 * torch.rand(env.num_envs, width, device=env.device, generator=env.generator) - 1.0


def _quat_from_small_angles(half: torch.Tensor) -> torch.Tensor:
    """The rotation by the rotation vector 2 * `half` (n, 3)."""
    angle = torch.linalg.vector_norm(half, dim=1, keepdim=True)
    axis_part = torch.where(angle > 1e-9, torch.sin(angle) / angle.clamp(min=1e-9), torch.ones_like(angle)) * half
    return torch.cat([torch.cos(angle), axis_part], dim=1)


def validate_motions(cfg: TrackingEnvConfig) -> list[Motion]:
    """The configured motions, loaded and checked against the robot and the control rate before
    anything is built: a UsageError names the file and what does not fit."""
    motion_cfg = cfg.motion
    if not motion_cfg.files:
        raise UsageError("the tracking task needs motions: give --env.motion.files FILE.npz ...")
    for names, flag in ((motion_cfg.end_effectors, "end-effectors"), ((motion_cfg.anchor_body,), "anchor-body")):
        if missing := [name for name in names if name not in motion_cfg.bodies]:
            raise UsageError(f"--env.motion.{flag}: {missing[0]!r} is not among --env.motion.bodies")
    robot = RobotKinematics(cfg.robot.mjcf)
    if missing := [name for name in motion_cfg.bodies if name not in robot.body_names]:
        raise UsageError(f"--env.motion.bodies: {robot.robot} has no body {missing[0]!r}")
    rate = 1.0 / ((cfg.sim.timestep or robot.model.opt.timestep) * cfg.sim.decimation)
    motions = [load_motion(name) for name in motion_cfg.files]
    for motion, name in zip(motions, motion_cfg.files, strict=True):
        _check_motion(motion, str(name), robot, cfg.robot.locked_joints, rate)
    return motions


def _check_motion(motion: Motion, source: str, robot: RobotKinematics, locked: tuple[str, ...], rate: float) -> None:
    if abs(motion.fps - rate) > 1e-6:
        raise UsageError(
            f"{source} runs at {motion.fps:g} fps and the task's control rate is {rate:g} Hz: "
            f"convert it with mjrl motion convert --out-fps {rate:g}"
        )
    if motion.body_names[0] != robot.body_names[0]:
        raise UsageError(f"{source}: its root body is {motion.body_names[0]!r}, the robot's {robot.body_names[0]!r}")
    if missing := [name for name in robot.joint_names if name not in motion.joint_names and name not in locked]:
        raise UsageError(f"{source}: the motion has no joint {missing[0]!r} of the robot")
    if missing := [name for name in robot.body_names if name not in motion.body_names]:
        raise UsageError(f"{source}: the motion has no body {missing[0]!r} of the robot")
    for name in locked:
        if name not in motion.joint_names:
            continue
        home = robot.home_qpos[robot.joint_qpos[robot.joint_names.index(name)]]
        moved = float(np.abs(motion.joint_pos[:, motion.joint_names.index(name)] - home).max())
        if moved > LOCKED_JOINT_TOLERANCE:
            raise UsageError(
                f"{source} moves {name} by up to {math.degrees(moved):.0f} degrees, and the task locks it: "
                "unlock it (--env.robot.locked-joints) or track another motion"
            )


def _frames(motion: Motion, env: VecEnv, bodies: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """A motion's arrays for this robot: joints in action order, the tracked bodies, the root."""
    joints = [motion.joint_names.index(name) for name in env.sim.actuator_joints()]
    tracked = [motion.body_names.index(name) for name in bodies]

    def t(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), dtype=torch.float32)

    return {
        "joint_pos": t(motion.joint_pos[:, joints]),
        "joint_vel": t(motion.joint_vel[:, joints]),
        "body_pos": t(motion.body_pos[:, tracked]),
        "body_quat": t(motion.body_quat[:, tracked]),
        "body_lin_vel": t(motion.body_lin_vel[:, tracked]),
        "body_ang_vel": t(motion.body_ang_vel[:, tracked]),
        "root_pos": t(motion.body_pos[:, 0]),
        "root_quat": t(motion.body_quat[:, 0]),
        "root_lin_vel": t(motion.body_lin_vel[:, 0]),
        "root_ang_vel": t(motion.body_ang_vel[:, 0]),
    }
