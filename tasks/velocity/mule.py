""" "Mule", a 44 kg quadruped of primitive shapes (`mule.xml`), on the velocity task: the worked
example of docs/writing-a-task.md. Its names and leg order differ from the Go1's; the task reads
them from this config alone."""

import dataclasses

from mjrl.rl.config import SymmetryConfig
from mjrl.tasks.robots.mule import MULE
from mjrl.tasks.velocity.config import (
    AGENT,
    RandomizationConfig,
    RewardConfig,
    VelocityEnvConfig,
    on_rough_terrain,
)
from mjrl.tasks.velocity.task import velocity_task

MULE_ENV = VelocityEnvConfig(
    robot=MULE,
    # Its torques are about 4x the Go1's: the same penalty weight would cost it 16x as much.
    rewards=RewardConfig(joint_torques=-1e-5),
    # The added mass scales with its 24 kg base (the Go1's +-1 kg on 5.2 kg); pushes change its
    # velocity by half as much as the 12.5 kg Go1's, still twice the Go1's momentum.
    randomization=RandomizationConfig(base_mass_offset=(-3.0, 3.0), push_velocity=0.25),
    # Worst cases as the Go1's: box 4 + thighs and shanks 2 each + feet 1 each = 24 contacts;
    # 72 constraint rows.
    sim=dataclasses.replace(VelocityEnvConfig.sim, nconmax=24, njmax=72),
)

# A quarter of the Go1's entropy bonus: at 0.01 its policy ended with action noise std 0.45 and
# came to rely on it; the mean policy fell in a fifth of its evaluation episodes (docs/benchmarks.md).
MULE_AGENT = AGENT.replace(entropy_coef=0.0025)

VELOCITY_FLAT_MULE = velocity_task("Mjrl-Velocity-Flat-Mule", MULE_ENV, MULE_AGENT)
# The same terrain as the Go1's, by config alone.
VELOCITY_ROUGH_MULE = velocity_task(
    "Mjrl-Velocity-Rough-Mule", on_rough_terrain(MULE_ENV), MULE_AGENT.replace(symmetry=SymmetryConfig(augment=True))
)
