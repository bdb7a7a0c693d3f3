"""The reference motions mjrl ships (`tasks/motions/`), made again by `mjrl motion make`:

- `humanoid_squat_reach.npz` (`make_squat`): a squat with both arms reaching forward, then
  raised high while rising halfway, 6 s, that no velocity command produces. Made from joint
  keyframes: the arms follow them, the pelvis is lowered by `SQUAT_DEPTH` and pitched forward,
  and every frame the legs and the pelvis's horizontal position are solved (inverse kinematics,
  damped least squares on MuJoCo's Jacobians) so that both feet stay where they stood at home
  and the whole body's centre of mass stays over the middle of the feet: quasi-static balance,
  the motion being slow.
- `humanoid_walk.npz` (`WALK`): the kept humanoid policy (`runs/humanoid-h`) walking forward at
  0.6 m/s for 6 s from a reset, recorded as `mjrl motion record` does (deterministic actions,
  seed 0, CPU).
"""

from __future__ import annotations

import itertools

import mujoco
import numpy as np

from mjrl.motion import Motion, RobotKinematics
from mjrl.motion.kinematics import quat_conj, quat_mul, rotation_vector

FPS = 50.0
SQUAT_DEPTH = 0.20  # m the pelvis goes down
SQUAT_PITCH = 0.35  # rad the pelvis leans forward at the bottom

# (time s, {joint: angle offset from home}, squat fraction 0..1): eased between keyframes.
# The waist, shoulder yaws and wrist rolls stay at home, so the CPU preset can lock them
# (configs/cpu-tracking.yaml): the walk does not move them either.
REACH = {"shoulder_pitch": -1.4, "elbow": -0.7, "shoulder_roll": -0.15}
RAISE = {"shoulder_pitch": -2.4, "elbow": -0.9, "shoulder_roll": 0.1}
KEYFRAMES = [
    (0.0, {}, 0.0),
    (0.8, {}, 0.0),
    (2.6, REACH, 1.0),
    (3.4, REACH, 1.0),
    (4.2, RAISE, 0.6),
    (5.4, {}, 0.0),
    (6.0, {}, 0.0),
]
LEGS = [
    f"{side}_{joint}_joint"
    for side in ("left", "right")
    for joint in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
]
FEET = ("left_foot", "right_foot")


def eased(t: float) -> tuple[dict[str, float], float]:
    """The keyframed offsets and squat fraction at time `t`, smoothstep-eased between keyframes."""
    for (t0, a, s0), (t1, b, s1) in itertools.pairwise(KEYFRAMES):
        if t0 <= t <= t1:
            u = (t - t0) / (t1 - t0)
            u = u * u * (3 - 2 * u)
            keys = set(a) | set(b)
            return {k: (1 - u) * a.get(k, 0.0) + u * b.get(k, 0.0) for k in keys}, (1 - u) * s0 + u * s1
    return {}, 0.0


def upper_body(kin: RobotKinematics, offsets: dict[str, float]) -> dict[int, float]:
    """qpos address -> angle of the arms and waist for these keyframe offsets (mirrored roll)."""
    model, angles = kin.model, {}
    for name in kin.joint_names:
        if name in LEGS:
            continue
        key = next((k for k in offsets if k in name), None)
        offset = offsets.get(key, 0.0) if key else 0.0
        if key == "shoulder_roll" and name.startswith("right"):
            offset = -offset
        address = int(model.jnt_qposadr[model.joint(name).id])
        angles[address] = kin.home_qpos[address] + offset
    return angles


def solve_frame(
    kin: RobotKinematics, qpos: np.ndarray, feet: list, support: np.ndarray, iterations: int = 100
) -> np.ndarray:
    """Legs and pelvis x, y so that the feet are at their poses `feet` and the centre of mass over
    `support` (x, y), the rest of `qpos` held."""
    model, data = kin.model, mujoco.MjData(kin.model)
    leg_dofs = [int(model.jnt_dofadr[model.joint(name).id]) for name in LEGS]
    free = [0, 1]  # the root's x and y
    columns = free + leg_dofs
    foot_ids = [model.body(name).id for name in FEET]
    jacp, jacr = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    qpos = qpos.copy()
    for _ in range(iterations):
        data.qpos[:] = qpos
        mujoco.mj_fwdPosition(model, data)
        errors, rows = [], []
        for body, (position, quat) in zip(foot_ids, feet, strict=True):
            mujoco.mj_jacBody(model, data, jacp, jacr, body)
            errors += [position - data.xpos[body], rotation_vector(quat_mul(quat, quat_conj(data.xquat[body])))]
            rows += [jacp[:, columns].copy(), jacr[:, columns].copy()]
        mujoco.mj_jacSubtreeCom(model, data, jacp, 1)
        errors.append(support - data.subtree_com[1, :2])
        rows.append(jacp[:2, columns].copy())
        error, jac = np.concatenate(errors), np.concatenate(rows)
        if np.abs(error).max() < 1e-7:
            break
        step = np.linalg.solve(jac.T @ jac + 1e-6 * np.eye(len(columns)), jac.T @ error)
        dq = np.zeros(model.nv)
        dq[columns] = step
        mujoco.mj_integratePos(model, qpos, dq, 1.0)
    return qpos


def make_squat(kin: RobotKinematics) -> tuple[np.ndarray, dict[str, float]]:
    model, data = kin.model, mujoco.MjData(kin.model)
    data.qpos[:] = kin.home_qpos
    mujoco.mj_fwdPosition(model, data)
    feet = [(data.xpos[model.body(n).id].copy(), data.xquat[model.body(n).id].copy()) for n in FEET]
    support = np.mean([p[:2] for p, _ in feet], axis=0)
    home_height = kin.home_qpos[2]
    frames, qpos = [], kin.home_qpos.copy()
    for t in np.arange(int(KEYFRAMES[-1][0] * FPS) + 1) / FPS:
        offsets, squat = eased(t)
        qpos = qpos.copy()
        for address, angle in upper_body(kin, offsets).items():
            qpos[address] = angle
        qpos[2] = home_height - SQUAT_DEPTH * squat
        pitch = SQUAT_PITCH * squat
        qpos[3:7] = [np.cos(pitch / 2), 0.0, np.sin(pitch / 2), 0.0]
        qpos = solve_frame(kin, qpos, feet, support)
        frames.append(qpos)
    qpos = np.array(frames)
    return qpos, squat_checks(kin, qpos, feet, support)


def squat_checks(kin: RobotKinematics, qpos: np.ndarray, feet: list, support: np.ndarray) -> dict[str, float]:
    model, data = kin.model, mujoco.MjData(kin.model)
    foot_error, com_error, torso = 0.0, 0.0, []
    for row in qpos:
        data.qpos[:] = row
        mujoco.mj_fwdPosition(model, data)
        for name, (position, _) in zip(FEET, feet, strict=True):
            foot_error = max(foot_error, np.linalg.norm(data.xpos[model.body(name).id] - position))
        com_error = max(com_error, np.linalg.norm(data.subtree_com[1, :2] - support))
        torso.append(data.xpos[model.body("torso").id, 2])
    for name, low, high in zip(kin.joint_names, model.jnt_range[1:, 0], model.jnt_range[1:, 1], strict=True):
        column = qpos[:, kin.joint_qpos[kin.joint_names.index(name)]]
        if column.min() < low - 1e-6 or column.max() > high + 1e-6:
            raise RuntimeError(f"the squat takes {name} out of its range [{low}, {high}]")
    return {
        "pelvis_drop_m": float(qpos[0, 2] - qpos[:, 2].min()),
        "torso_drop_m": float(torso[0] - min(torso)),
        "max_foot_error_m": float(foot_error),
        "max_com_error_m": float(com_error),
    }


WALK = (
    "Mjrl-Velocity-Flat-Humanoid", "--seconds", "6", "--seed", "0", "--env.commands.lin-vel-x", "0.6", "0.6",
    "--env.commands.lin-vel-y", "0", "0", "--env.commands.yaw-rate", "0", "0",
)  # fmt: skip
"""`mjrl motion record`'s arguments for the walk, before `--run-dir` and `--out`."""


def squat_motion() -> tuple[Motion, dict[str, float]]:
    """The squat-reach as a motion, and the checks it is made to pass: the pelvis and torso
    lowered by at least 0.15 m, the feet still within a millimetre, the centre of mass within
    5 mm of the middle of the support (a RuntimeError otherwise)."""
    kinematics = RobotKinematics("humanoid")
    qpos, checks = make_squat(kinematics)
    if checks["torso_drop_m"] < 0.15 or checks["max_foot_error_m"] > 1e-3 or checks["max_com_error_m"] > 5e-3:
        raise RuntimeError(f"the squat fails its checks: {checks}")
    return kinematics.motion(qpos, FPS), checks
