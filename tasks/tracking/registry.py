"""The motion-tracking tasks (definitions in each robot's module, imported when asked for)."""

from mjrl.tasks import register_task

register_task(
    "Mjrl-Tracking-Flat-Humanoid",
    "mjrl.tasks.tracking.humanoid:TRACKING_FLAT_HUMANOID",
    "G1-class 23-DoF humanoid imitating reference motions (mjrl's walk and squat-reach; --env.motion.files)",
)
