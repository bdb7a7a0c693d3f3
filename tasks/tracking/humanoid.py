"""mjrl's 23-DoF humanoid imitating reference motions (`Mjrl-Tracking-Flat-Humanoid`): by
default every motion mjrl ships (`tasks/motions/`), all 23 joints actuated.

The bodies tracked are BeyondMimic's choice for the G1, on this robot: the pelvis and torso,
each leg's hip, knee and foot links and each arm's shoulder, elbow and wrist; the feet and
wrists are the end effectors whose height ends an episode. Nothing touching the ground ends an
episode (a motion may kneel); anything but the feet touching it is penalised.
"""

import dataclasses

from mjrl.tasks.robots.humanoid import HUMANOID, SIDES
from mjrl.tasks.tracking.config import MotionConfig, TrackingEnvConfig
from mjrl.tasks.tracking.task import tracking_task

LEG_BODIES = ("hip_roll_link", "shank", "foot")
ARM_BODIES = ("shoulder_roll_link", "elbow_link", "wrist_roll_link")
BODIES = (
    "pelvis",
    *(f"{side}_{part}" for side in SIDES for part in LEG_BODIES),
    "torso",
    *(f"{side}_{part}" for side in SIDES for part in ARM_BODIES),
)
END_EFFECTORS = tuple(f"{side}_{part}" for side in SIDES for part in ("foot", "wrist_roll_link"))

TRACKING_ROBOT = dataclasses.replace(
    HUMANOID,
    fatal_contact_geoms=(),
    undesired_contact_geoms=(
        "pelvis",
        "torso",
        "head",
        *(f"{side}_{part}" for side in SIDES for part in ("thigh", "shank", "upper_arm", "forearm")),
    ),
)

TRACKING_HUMANOID_ENV = TrackingEnvConfig(
    robot=TRACKING_ROBOT,
    motion=MotionConfig(
        files=("mjrl:motions/humanoid_walk.npz", "mjrl:motions/humanoid_squat_reach.npz"),
        anchor_body="torso",
        bodies=BODIES,
        end_effectors=END_EFFECTORS,
    ),
    # Episodes end before anything but the feet lies on the ground: the feet's 8 contacts and a
    # few of legs touching, each foot contact 4 constraint rows, and the joint limits. Buffers
    # sized for a fallen robot (the velocity task's 64 and 160) cost 15 % of the CPU's rate.
    sim=dataclasses.replace(TrackingEnvConfig.sim, nconmax=32, njmax=96),
)

TRACKING_FLAT_HUMANOID = tracking_task("Mjrl-Tracking-Flat-Humanoid", TRACKING_HUMANOID_ENV)
