""" "Mule", a 44 kg quadruped of primitive shapes (`mule.xml`): its names and leg order differ
from the Go1's, which is what it is for (the worked example of docs/writing-a-task.md)."""

from mjrl.envs.robot import RobotConfig

LEGS = ("LF", "RF", "LH", "RH")

MULE = RobotConfig(
    mjcf="mjrl:robots/mule.xml",
    base_body="base",
    joints=tuple(f"{leg}_{joint}" for leg in LEGS for joint in ("HAA", "HFE", "KFE")),
    home_keyframe="stand",
    foot_geoms=tuple(f"{leg}_foot_geom" for leg in LEGS),
    fatal_contact_geoms=("base_box", *(f"{leg}_thigh_geom" for leg in LEGS)),
    undesired_contact_geoms=("base_box", *(f"{leg}_{part}_geom" for part in ("thigh", "shank") for leg in LEGS)),
    mirror_names=(("LF", "RF"), ("LH", "RH")),
)
