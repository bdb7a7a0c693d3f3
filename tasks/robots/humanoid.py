"""A G1-class humanoid (`humanoid.xml`: 23 DoF, 33.8 kg, 1.32 m): legs of six joints, a waist
yaw joint and arms of five."""

from mjrl.envs.robot import RobotConfig

SIDES = ("left", "right")
ARM_JOINTS = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll")
UPPER_BODY_JOINTS = ("waist_yaw_joint", *(f"{side}_{joint}_joint" for side in SIDES for joint in ARM_JOINTS))
"""What the CPU preset locks at home."""

HUMANOID = RobotConfig(
    mjcf="mjrl:robots/humanoid.xml",
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
