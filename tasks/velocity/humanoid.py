"""A G1-class humanoid (`humanoid.xml`: 23 DoF, 33.8 kg, 1.32 m) on the velocity task.

What a biped needs beyond the quadruped's terms, each a reward weight of the shared task: a
reference gait clock (`GaitConfig`) whose stance and swing phases the feet are paid to follow,
instead of every foot's air time; level soles; self-collisions; the whole body's angular
momentum; hip roll and yaw held near home; and a stronger penalty on a tilted base. The torso
is upright when the pelvis is: the only joint between them turns about the vertical (waist
yaw), so the pelvis's tilt is the torso's.

Why a clock: with single stance rewarded (Isaac Lab's biped air-time term) instead, two runs
stood on both feet for 6.6 M env steps and more (foot contact 98 %, docs/benchmarks.md). A
policy that lifts a foot at random falls long before it is paid for a step; the clock pays each
foot at every step it is where the reference gait has it.

`Mjrl-Velocity-Flat-Humanoid` actuates all 23 joints (the GPU default). The CPU preset
(`configs/cpu-humanoid.yaml`) locks the waist and the arms at home (`--env.robot.locked-joints`)
and trains the 12 leg joints: 19 position coordinates instead of 30.
"""

import dataclasses
from pathlib import Path

from mjrl.envs.robot import RobotConfig
from mjrl.rl.config import SymmetryConfig
from mjrl.tasks.velocity import velocity_task
from mjrl.tasks.velocity.config import (
    AGENT,
    CommandConfig,
    GaitConfig,
    RandomizationConfig,
    RewardConfig,
    VelocityEnvConfig,
)

SIDES = ("left", "right")
ARM_JOINTS = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll")
UPPER_BODY_JOINTS = ("waist_yaw_joint", *(f"{side}_{joint}_joint" for side in SIDES for joint in ARM_JOINTS))
"""What the CPU preset locks at home."""

HUMANOID = RobotConfig(
    mjcf=str(Path(__file__).parent / "humanoid.xml"),
    base_body="pelvis",
    joints=(),  # the actuated joints in actuator order: legs, then waist and arms
    home_keyframe="home",
    foot_geoms=tuple(f"{side}_foot" for side in SIDES),
    # Pelvis, torso, head, a thigh or an arm on the ground ends the episode; a shank is penalised.
    fatal_contact_geoms=(
        "pelvis",
        "torso",
        "head",
        *(f"{side}_{part}" for side in SIDES for part in ("thigh", "upper_arm", "forearm")),
    ),
    undesired_contact_geoms=tuple(f"{side}_shank" for side in SIDES),
    mirror_names=(("left", "right"),),
    action_scale_from_torque=0.25,
)

HUMANOID_ENV = VelocityEnvConfig(
    robot=HUMANOID,
    commands=CommandConfig(lin_vel_x=(-0.5, 1.0), lin_vel_y=(-0.3, 0.3), yaw_rate=(-1.0, 1.0)),
    rewards=RewardConfig(
        flat_orientation=-5.0,
        # Torques are 4-6x the Go1's (Mule's weight).
        joint_torques=-1e-5,
        feet_air_time=0.0,
        # Each foot paid for following the gait clock: rl_gym's G1 ratio of contact to
        # tracking reward (0.18 per foot to 1.0), scaled to the 2.0 tracking weight and rounded.
        feet_gait=0.4,
        feet_tilt=-1.0,
        feet_clearance_height=0.1,
        self_collisions=-1.0,
        angular_momentum=-0.02,
        joint_deviation=-0.2,
        joint_deviation_joints=("*hip_roll*", "*hip_yaw*", "waist*", "*shoulder*", "*elbow*", "*wrist*"),
    ),
    # Mass offsets scaled to the 3.8 kg pelvis (the Go1's +-1 kg on 5.2 kg); pushes as the Go1's.
    # Half the Go1's initial base velocities: a biped starts on a narrow support.
    # A step of each foot every 0.8 s, each on the ground 55 % of the time (rl_gym's G1 gait).
    gait=GaitConfig(foot_phase_offsets=(0.0, 0.5)),
    randomization=RandomizationConfig(base_mass_offset=(-1.0, 2.0), base_vel_noise=0.25),
    # Ground contacts are at most 33 per world (humanoid.xml), 8 of them the feet's with 4
    # constraint rows each (condim 3, pyramidal); self-collisions add a few (two feet overlapping
    # could make 8). 64 contacts and 160 rows (with 23 joint limits) leave room for both.
    sim=dataclasses.replace(VelocityEnvConfig.sim, nconmax=64, njmax=160),
)

# Trained on every sample and its mirror image: on the quadruped that met the targets in less
# than half the env steps of plain PPO (docs/benchmarks.md), and a biped's gait is left-right
# symmetric by nature.
VELOCITY_FLAT_HUMANOID = velocity_task(
    "Mjrl-Velocity-Flat-Humanoid", HUMANOID_ENV, AGENT.replace(symmetry=SymmetryConfig(augment=True))
)
