"""The Go1-class quadruped (12.5 kg, `go1.xml`) on the velocity task, on flat ground and on
rough terrain with a curriculum."""

import dataclasses
from pathlib import Path

from mjrl.envs import Task
from mjrl.envs.robot import RobotConfig
from mjrl.tasks.velocity import build, play_metrics
from mjrl.tasks.velocity.config import AGENT, ROUGH, VelocityEnvConfig

LEGS = ("FR", "FL", "RR", "RL")

GO1 = RobotConfig(
    mjcf=str(Path(__file__).parent / "go1.xml"),
    base_body="trunk",
    joints=tuple(f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf")),
    home_keyframe="home",
    foot_geoms=tuple(f"{leg}_foot" for leg in LEGS),
    # Touching the ground with the trunk or a thigh ends the episode; a calf is only penalised.
    fatal_contact_geoms=("trunk", *(f"{leg}_thigh" for leg in LEGS)),
    undesired_contact_geoms=("trunk", *(f"{leg}_{part}" for part in ("thigh", "calf") for leg in LEGS)),
)

GO1_ENV = VelocityEnvConfig(
    robot=GO1,
    sim=dataclasses.replace(
        VelocityEnvConfig.sim,
        # Geometric worst cases, so they can never overflow: at most 24 contacts per world (trunk
        # box 4, thigh and calf capsules 2 each, feet 1 each) and 72 constraint rows (trunk and
        # thighs 1 row per contact as condim 1, calves and feet 4 (pyramidal condim 3), plus 12
        # joint limits). `scripts/bench_quadruped.py --check-buffers` saw at most 8 contacts and
        # 32 rows in a world; on the CPU with 64 worlds these bounds run as fast as (8, 32) or
        # mujoco_warp's defaults (48, 64) within the noise of a few percent.
        nconmax=24,
        njmax=72,
    ),
)

VELOCITY_FLAT = Task(
    name="Mjrl-Velocity-Flat-Quadruped",
    env_cfg=GO1_ENV,
    agent_cfg=AGENT,
    build=build,
    play_metrics=play_metrics,
)

GO1_ROUGH_ENV = dataclasses.replace(
    GO1_ENV,
    **ROUGH,
    # On the heightfield a geom touches up to 4 of its triangles, not 1 plane: 40 contacts and
    # 128 rows cover what `scripts/bench_quadruped.py --check-buffers` saw with margin.
    sim=dataclasses.replace(GO1_ENV.sim, nconmax=40, njmax=128),
)

VELOCITY_ROUGH = Task(
    name="Mjrl-Velocity-Rough-Quadruped",
    env_cfg=GO1_ROUGH_ENV,
    agent_cfg=AGENT,
    build=build,
    play_metrics=play_metrics,
)
