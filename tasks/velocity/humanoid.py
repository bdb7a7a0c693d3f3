"""A G1-class humanoid (`humanoid.xml`: 23 DoF, 33.8 kg, 1.32 m) on the velocity task.

What a biped needs beyond the quadruped's terms, each a reward weight of the shared task:
mjlab's G1 payments for being upright and near the home posture (instead of the quadruped's
penalties on tilt and falling); a reference gait clock (`GaitConfig`) whose stance and swing
phases the feet and a reference swing the legs are paid to follow, instead of every foot's air
time; level soles; self-collisions; the whole body's angular momentum. The torso is upright
when the pelvis is: the only joint between them turns about the vertical (waist yaw), so the
pelvis's tilt is the torso's.

Why: with the quadruped's terms and single stance rewarded (Isaac Lab's biped air-time term),
two runs stood on both feet for 6.6 M env steps and more (foot contact 98 %,
docs/benchmarks.md). A policy that lifts a foot at random falls long before it is paid for a
step; the clock pays a leg at every step it is where the reference gait has it, and the
reference swing pays it for starting to bend before its foot leaves the ground. Paid alone,
the clock still ends in a shuffle (contact above 90 %, swings under 0.1 s); with the reference
swing added to the joint targets (`GaitConfig.feedforward`) the policy is a correction around
a gait that steps, and it keeps that gait from 1.9 M env steps on (run F, docs/benchmarks.md).

`Mjrl-Velocity-Flat-Humanoid` actuates all 23 joints (the GPU default). The CPU preset
(`configs/cpu-humanoid.yaml`) locks the waist and the arms at home (`--env.robot.locked-joints`)
and trains the 12 leg joints: 19 position coordinates instead of 30.
"""

import dataclasses

from mjrl.rl.config import SymmetryConfig
from mjrl.tasks.robots.humanoid import HUMANOID
from mjrl.tasks.velocity.config import (
    AGENT,
    CommandConfig,
    GaitConfig,
    RandomizationConfig,
    RewardConfig,
    VelocityEnvConfig,
)
from mjrl.tasks.velocity.task import velocity_task

# The leg joints a step swings, their offsets from home at mid-swing (rad): the sole rises about
# 8 cm and stays level (test_the_reference_swing_lifts_the_swinging_foot_with_its_sole_level).
SWING_JOINT_OFFSETS = (("*hip_pitch*", -0.35), ("*knee*", 0.7), ("*ankle_pitch*", -0.35))

# Per joint, how far from home the posture payment lets it go while walking (rad); mjlab's G1
# values: loose for the joints a stride swings, tight for those that keep balance.
WALKING_POSTURE_STD = (
    ("*hip_pitch*", 0.3),
    ("*hip_roll*", 0.15),
    ("*hip_yaw*", 0.15),
    ("*knee*", 0.35),
    ("*ankle_pitch*", 0.25),
    ("*ankle_roll*", 0.1),
    ("*", 0.15),  # waist and arms
)

HUMANOID_ENV = VelocityEnvConfig(
    robot=HUMANOID,
    commands=CommandConfig(lin_vel_x=(-0.5, 1.0), lin_vel_y=(-0.3, 0.3), yaw_rate=(-1.0, 1.0)),
    # mjlab's G1 terms: payments for tracking, being upright and the home posture instead of
    # penalties on tilt, vertical speed, accelerations, torques and falling. A fall costs what
    # the rest of the episode would have paid.
    rewards=RewardConfig(
        # Twice mjlab's weight: at 2.0 the policy walked at 80 % of the commanded speed, the
        # tracking payment too flat near zero error to outweigh the posture and action-rate
        # costs of a longer stride; at 4.0 the forward error fell from 0.18 to 0.13 m/s within
        # 1.5 M env steps of continuing run G, and run H met every target from scratch at
        # 19.6 M env steps (docs/benchmarks.md).
        track_lin_vel=4.0,
        track_yaw_rate=2.0,
        yaw_tracking_sigma=0.5,
        flat_orientation=0.0,
        upright=1.0,
        posture=1.0,
        posture_std_walking=WALKING_POSTURE_STD,
        lin_vel_z=0.0,
        joint_acc=0.0,
        joint_torques=0.0,
        termination=0.0,
        # Steps paid through the gait clock instead of air time (chosen at the 2.0 tracking
        # weight: twice rl_gym's G1 ratio of contact to tracking reward, 0.18 per foot to 1.0),
        # and weight left on a swinging foot penalised (run F, docs/benchmarks.md).
        feet_air_time=0.0,
        feet_gait=0.8,
        gait_joints=3.0,
        feet_swing_load=-1.0,
        feet_tilt=-1.0,
        feet_clearance_height=0.1,
        self_collisions=-1.0,
        angular_momentum=-0.02,
    ),
    # A step of each foot every 0.8 s, each on the ground 55 % of the time (rl_gym's G1 gait),
    # its reference swing fed forward into the joint targets: the policy corrects a gait that
    # steps, instead of discovering the step (without it: a shuffle, run F in docs/benchmarks.md).
    # While walking only the knees are paid for following it: the reference steps in place, and a
    # policy paid for keeping its hips and ankles on it walks at 70 % of the commanded speed
    # ("Why run F walks slowly", docs/benchmarks.md). Told to stand, every swing joint is paid
    # for staying home.
    gait=GaitConfig(
        foot_phase_offsets=(0.0, 0.5),
        swing_joint_offsets=SWING_JOINT_OFFSETS,
        paid_joints=("*knee*",),
        feedforward=True,
    ),
    # Mass offsets scaled to the 3.8 kg pelvis (the Go1's +-1 kg on 5.2 kg). Half the Go1's
    # initial base velocities: a biped starts on a narrow support. Pushes every 1-3 s (mjlab's
    # rate): standing still on both feet does not survive them, stepping does.
    randomization=RandomizationConfig(base_mass_offset=(-1.0, 2.0), base_vel_noise=0.25, push_interval_s=(1.0, 3.0)),
    max_tilt_rad=1.22,  # 70 degrees, mjlab's
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
