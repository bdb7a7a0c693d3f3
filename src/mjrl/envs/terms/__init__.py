"""Robot-agnostic terms for floating-base robots, by kind: observations, rewards, terminations
and events that read only `env.robot` (a resolved `RobotConfig`), the simulation and the env;
mirror images for symmetry, and what they share (`common.py`). Every term is also a name of this
package (`from mjrl.envs import terms as mdp; mdp.base_lin_vel`), wherever it is defined.

Every function takes the env first; settings come after it and are bound with
`functools.partial` when a task builds its terms. Quantities that several terms derive from one
state (the base's rotation, its velocity in its own frame) go through `env.cached`, so they cost
their tensor operations once per state.
"""

from mjrl.envs.terms.common import (
    UniformRanges,
    base_rotation_transposed,
    masked_write,
    quat_products_to_rotation,
    uniform,
)
from mjrl.envs.terms.events import (
    ResetToHome,
    home_joint_positions,
    push_base,
    randomize_friction_and_mass,
    spawn_offset,
)
from mjrl.envs.terms.mirrors import (
    AXIAL_VECTOR,
    POLAR_VECTOR,
    mirror_feet,
    mirror_joints,
    mirror_signs,
    unchanged,
)
from mjrl.envs.terms.observations import (
    HeightScan,
    base_ang_vel,
    base_height,
    base_lin_vel,
    base_mass_offset,
    base_position,
    command,
    ground_friction,
    joint_pos_rel,
    joint_vel,
    last_action,
    projected_gravity,
    scan_offsets,
    scan_problem,
)
from mjrl.envs.terms.quaternions import (
    quat_angle,
    quat_apply,
    quat_apply_inverse,
    quat_conj,
    quat_mul,
    rotation_columns,
    yaw_quat,
)
from mjrl.envs.terms.rewards import (
    AngularMomentum,
    JointDeviation,
    action_rate,
    ang_vel_xy,
    flat_orientation,
    is_terminated,
    joint_acc,
    joint_limits,
    joint_torques,
    lin_vel_z,
    per_joint_values,
    self_collisions,
    subtree_angmom_columns,
    undesired_contacts,
    upright,
)
from mjrl.envs.terms.terminations import (
    bad_orientation,
    illegal_contact,
    out_of_bounds,
)

__all__ = [
    "AXIAL_VECTOR",
    "POLAR_VECTOR",
    "AngularMomentum",
    "HeightScan",
    "JointDeviation",
    "ResetToHome",
    "UniformRanges",
    "action_rate",
    "ang_vel_xy",
    "bad_orientation",
    "base_ang_vel",
    "base_height",
    "base_lin_vel",
    "base_mass_offset",
    "base_position",
    "base_rotation_transposed",
    "command",
    "flat_orientation",
    "ground_friction",
    "home_joint_positions",
    "illegal_contact",
    "is_terminated",
    "joint_acc",
    "joint_limits",
    "joint_pos_rel",
    "joint_torques",
    "joint_vel",
    "last_action",
    "lin_vel_z",
    "masked_write",
    "mirror_feet",
    "mirror_joints",
    "mirror_signs",
    "out_of_bounds",
    "per_joint_values",
    "projected_gravity",
    "push_base",
    "quat_angle",
    "quat_apply",
    "quat_apply_inverse",
    "quat_conj",
    "quat_mul",
    "quat_products_to_rotation",
    "randomize_friction_and_mass",
    "rotation_columns",
    "scan_offsets",
    "scan_problem",
    "self_collisions",
    "spawn_offset",
    "subtree_angmom_columns",
    "unchanged",
    "undesired_contacts",
    "uniform",
    "upright",
    "yaw_quat",
]
