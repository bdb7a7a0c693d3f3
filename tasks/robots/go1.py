"""The Go1-class quadruped (12.5 kg, `go1.xml`): 12 position-controlled joints, three per leg."""

from mjrl.envs.robot import RobotConfig

LEGS = ("FR", "FL", "RR", "RL")

GO1 = RobotConfig(
    mjcf="mjrl:robots/go1.xml",
    base_body="trunk",
    joints=tuple(f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf")),
    home_keyframe="home",
    foot_geoms=tuple(f"{leg}_foot" for leg in LEGS),
    # Touching the ground with the trunk or a thigh ends the episode; a calf is only penalised.
    fatal_contact_geoms=("trunk", *(f"{leg}_thigh" for leg in LEGS)),
    undesired_contact_geoms=("trunk", *(f"{leg}_{part}" for part in ("thigh", "calf") for leg in LEGS)),
    mirror_names=(("FL", "FR"), ("RL", "RR")),
)
