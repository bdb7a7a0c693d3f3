"""The Go1-class quadruped (12.5 kg, `go1.xml`) on the velocity task, on flat ground and on
rough terrain with a curriculum."""

import dataclasses

from mjrl.tasks.robots.go1 import GO1
from mjrl.tasks.velocity.config import ROUGH_AGENT, STUDENT_AGENT, VelocityEnvConfig, as_student, on_rough_terrain
from mjrl.tasks.velocity.task import velocity_task

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

# SAC on the flat quadruped (`--algo sac`; docs/benchmarks.md, "SAC", sessions 30-31). Its actions
# in the env's units: PPO's walking policy commands |a| > 1 on 39 % of its joint targets, and the
# default bound of 1 keeps the legs within +-0.25 rad of home. The critics' support fixed: for
# returns within about [-11, 3] the automatic one gives +-86 (the end's -10 once, plus random
# actions' 0.76 a step over 1 - gamma). Exploration of PPO's order: a target entropy of 1 per
# joint holds the squashed Gaussian near a std of 0.3 action units at +-3, and the temperature
# starts where it settles (0.01). With a target of -1 or 0.1 per joint (std 0.1-0.3 below
# that) it stood for 4.7 M env steps on the CPU and 53 M on a GPU: its critics, having seen
# motion only before the early falls, valued walking as a fall and the actor never tried it.
# LayerNorm in the critics: every target met at 4.2 M env steps against 5.7 M without (one seed each).
GO1_SAC = {
    "algorithm": {"batch_size": 4096, "updates_per_step": 1, "action_bound": 3.0, "v_max": 20.0,
                  "init_temperature": 0.01, "target_entropy": 1.0, "critic_layer_norm": True},
}  # fmt: skip
VELOCITY_FLAT = dataclasses.replace(
    velocity_task("Mjrl-Velocity-Flat-Quadruped", GO1_ENV), algorithm_settings={"sac": GO1_SAC}
)
VELOCITY_ROUGH = velocity_task("Mjrl-Velocity-Rough-Quadruped", on_rough_terrain(GO1_ENV), ROUGH_AGENT)
# A student for distillation from a trained VELOCITY_FLAT policy (`--algo distillation --algorithm.teacher RUN`):
# it observes what the robot measures, without the base's linear velocity, with 5 steps of history.
VELOCITY_FLAT_STUDENT = velocity_task("Mjrl-Velocity-Flat-Quadruped-Student", as_student(GO1_ENV), STUDENT_AGENT)
# A blind student of a trained VELOCITY_ROUGH policy (issue 63): no height scan and no base linear
# velocity; it feels the terrain through its joints, with 5 steps of history or a memory
# (`--policy.rnn-type lstm --env.actor-obs.history 1`). Distilled as the flat student is.
VELOCITY_ROUGH_BLIND_STUDENT = velocity_task(
    "Mjrl-Velocity-Rough-Quadruped-Blind-Student",
    as_student(on_rough_terrain(GO1_ENV), height_scan=False),
    STUDENT_AGENT,
)
