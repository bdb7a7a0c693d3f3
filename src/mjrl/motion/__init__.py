"""Reference motions: what a tracking task imitates.

A motion is a robot's joints and bodies over time at a fixed rate (`Motion`, one NPZ file,
`file.py`), made from root poses and joint angles by MuJoCo's forward kinematics
(`kinematics.py`): from a CSV of retargeted mocap (`convert.py`), from a trained policy's play
(`mjrl motion record`), or from joint keyframes. `mjrl motion` is the command line.
"""

from mjrl.motion.file import FORMAT_VERSION, Motion, load_motion, motion_file, save_motion
from mjrl.motion.kinematics import RobotKinematics, resample_qpos

__all__ = [
    "FORMAT_VERSION",
    "Motion",
    "RobotKinematics",
    "load_motion",
    "motion_file",
    "resample_qpos",
    "save_motion",
]
