"""The velocity-tracking tasks, one per robot and ground (definitions in each robot's module,
imported when asked for)."""

from mjrl.tasks import register_task

register_task(
    "Mjrl-Velocity-Flat-Quadruped", "mjrl.tasks.velocity.go1:VELOCITY_FLAT", "Go1-class quadruped, velocity tracking"
)
register_task(
    "Mjrl-Velocity-Rough-Quadruped",
    "mjrl.tasks.velocity.go1:VELOCITY_ROUGH",
    "Go1-class quadruped on stairs, slopes and rough ground, with a terrain curriculum",
)
register_task(
    "Mjrl-Velocity-Flat-Quadruped-Student",
    "mjrl.tasks.velocity.go1:VELOCITY_FLAT_STUDENT",
    "the flat Go1 without base velocity, distilled from a teacher (--algo distillation --algorithm.teacher RUN)",
)
register_task(
    "Mjrl-Velocity-Rough-Quadruped-Blind-Student",
    "mjrl.tasks.velocity.go1:VELOCITY_ROUGH_BLIND_STUDENT",
    "the rough Go1 without height scan or base velocity, distilled from a rough teacher (--algo distillation)",
)
register_task(
    "Mjrl-Velocity-Flat-Mule", "mjrl.tasks.velocity.mule:VELOCITY_FLAT_MULE", "44 kg quadruped, velocity tracking"
)
register_task(
    "Mjrl-Velocity-Rough-Mule", "mjrl.tasks.velocity.mule:VELOCITY_ROUGH_MULE", "44 kg quadruped on the same terrain"
)
register_task(
    "Mjrl-Velocity-Flat-Humanoid",
    "mjrl.tasks.velocity.humanoid:VELOCITY_FLAT_HUMANOID",
    "G1-class 23-DoF humanoid, velocity tracking (CPU preset: configs/cpu-humanoid.yaml, legs only)",
)
