"""The velocity task's settings: commands, observation noise, rewards, randomisation, and the
robot (`mjrl.envs.robot.RobotConfig`, names in its MJCF)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from mjrl.envs import EnvConfig
from mjrl.envs.robot import RobotConfig
from mjrl.rl.config import AgentConfig, PolicyConfig, PpoConfig, RunnerConfig, SymmetryConfig
from mjrl.sim import SimConfig, TerrainConfig


@dataclasses.dataclass(frozen=True)
class CommandConfig:
    """Velocity commands, in the robot's heading frame."""

    lin_vel_x: tuple[float, float] = (-1.0, 1.0)
    """Range of the forward velocity command (m/s)."""
    lin_vel_y: tuple[float, float] = (-0.5, 0.5)
    """Range of the lateral velocity command (m/s)."""
    yaw_rate: tuple[float, float] = (-1.0, 1.0)
    """Range of the yaw rate command (rad/s)."""
    standing_fraction: float = 0.1
    """Probability that a (re)sampled command is zero: stand still."""
    resample_interval_s: tuple[float, float] = (3.0, 8.0)
    """Commands are resampled after a time drawn uniformly from this range (and at resets)."""
    heading: bool = False
    """Command a heading (drawn uniformly) instead of a yaw rate: the yaw-rate command steers
    towards it, 0.5 rad/s per rad of error within `yaw_rate`, so robots walk straight lines
    (rough terrain: the curriculum judges how far they get)."""

    bounds: ClassVar[dict] = {
        "lin_vel_x": "ordered",
        "lin_vel_y": "ordered",
        "yaw_rate": "ordered",
        "standing_fraction": "[0, 1]",
        "resample_interval_s": ("> 0", "ordered"),
    }


@dataclasses.dataclass(frozen=True)
class ObsNoiseConfig:
    """Std of the Gaussian noise on actor observations (used when `obs_noise` is on)."""

    lin_vel: float = 0.1
    """Base linear velocity (m/s)."""
    ang_vel: float = 0.2
    """Base angular velocity (rad/s)."""
    gravity: float = 0.05
    """Projected gravity (unit vector)."""
    joint_pos: float = 0.01
    """Joint positions (rad)."""
    joint_vel: float = 1.5
    """Joint velocities (rad/s)."""
    height_scan: float = 0.05
    """Height scan (m)."""

    bounds: ClassVar[dict] = {
        name: ">= 0" for name in ("lin_vel", "ang_vel", "gravity", "joint_pos", "joint_vel", "height_scan")
    }


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """Reward weights, per second of simulated time (multiplied by the 0.02 s env step).

    Tracking, action-rate and foot terms follow mjlab's velocity task (its Go1 weights): a policy
    that moves by jittering its joints, feet sliding on the ground, must pay for it, or the noise
    of the Gaussian policy is what tracks the command and its mean action barely moves."""

    track_lin_vel: float = 2.0
    """exp(-|v_xy - command_xy|^2 / tracking_sigma), base frame."""
    track_yaw_rate: float = 1.0
    """exp(-(w_z - command_yaw)^2 / tracking_sigma), base frame."""
    tracking_sigma: float = 0.25
    """Squared error (m^2/s^2) at which the linear velocity's tracking reward falls to 1/e."""
    yaw_tracking_sigma: float = 0.25
    """Squared error (rad^2/s^2) at which the yaw rate's tracking reward falls to 1/e."""
    lin_vel_z: float = -2.0
    """Vertical base velocity squared."""
    ang_vel_xy: float = -0.05
    """Roll and pitch rate squared."""
    joint_torques: float = -2e-4
    """Sum of squared actuator torques (Nm^2)."""
    joint_acc: float = -2.5e-7
    """Sum of squared joint accelerations ((rad/s^2)^2)."""
    action_rate: float = -0.1
    """Sum of squared changes of the raw action between env steps (mjlab's weight; -0.01 left
    a jittering policy almost unpunished)."""
    undesired_contacts: float = -1.0
    """Number of the robot's undesired-contact geoms (e.g. trunk, thighs, calves) touching the floor."""
    flat_orientation: float = -2.0
    """Squared horizontal components of gravity in the base frame (0 when level)."""
    upright: float = 0.0
    """exp(-flat_orientation's quantity / upright_sigma): paid for being level, 1 at most."""
    upright_sigma: float = 0.2
    """Squared horizontal gravity component at which `upright` falls to 1/e (0.2: a 27 degree tilt)."""
    termination: float = -500.0
    """Paid on the step an episode terminates (not on time-outs): -500 x 0.02 s = -10. Without it
    an untrained policy, whose penalties outweigh its tracking reward, learns to fall at once."""
    feet_air_time: float = 1.0
    """Sum over feet touching down of (air time - feet_air_time_threshold), while commanded to move."""
    feet_air_time_threshold: float = 0.5
    """Swing duration (s) above which a step is rewarded and below which it is penalised."""
    feet_slip: float = -0.1
    """Sum over feet on the ground of their squared horizontal speed (m^2/s^2), while commanded
    to move: feet that slide instead of stepping."""
    feet_clearance: float = -2.0
    """Sum over feet of |height above ground - feet_clearance_height| times the foot's horizontal
    speed, while commanded to move: a foot that moves should be lifted."""
    feet_clearance_height: float = 0.08
    """Target height (m) of the bottom of a moving foot."""
    feet_single_stance: float = 0.0
    """Bipeds: while commanded to move with exactly one foot down, the time the foot that changed
    phase last has spent in it, up to `feet_single_stance_threshold` (replaces feet_air_time)."""
    feet_single_stance_threshold: float = 0.4
    """Step duration (s) up to which single stance is rewarded."""
    feet_gait: float = 0.0
    """Number of feet whose contact matches the reference gait (`VelocityEnvConfig.gait`): down
    in their stance phase and up in their swing phase while commanded to move, down while told
    to stand. Needs the gait clock."""
    gait_joints: float = 0.0
    """exp(-2 |q - q_ref|) over the joints `GaitConfig.swing_joint_offsets` names, q_ref the
    gait clock's reference swing: paid for bending a leg as its foot's swing begins."""
    feet_swing_load: float = 0.0
    """Sum over the feet in their swing phase of the reference gait, while commanded to move, of
    the normal force on each over the robot's weight: weight shifted off a foot before it lifts.
    Needs the gait clock and a touch sensor on each foot."""
    feet_tilt: float = 0.0
    """Sum over feet of the squared horizontal components of gravity in the foot's frame (soles
    that are not level: flat feet)."""
    self_collisions: float = 0.0
    """Number of contacts between two of the robot's own geoms (legs knocking, feet crossing)."""
    angular_momentum: float = 0.0
    """Squared norm of the whole robot's angular momentum about its centre of mass
    ((kg m^2/s)^2); needs a `subtreeangmom` sensor on the base body in the robot's MJCF."""
    joint_deviation: float = 0.0
    """Sum of |q - q_home| (rad) over the joints that `joint_deviation_joints` name."""
    joint_deviation_joints: tuple[str, ...] = ()
    """Shell-style patterns of the joints held near home by `joint_deviation` (e.g. "*hip_roll*")."""
    posture: float = 0.0
    """exp(-mean over the actuated joints of ((q - q_home) / std)^2): paid for the home pose,
    with a tight std while told to stand and a per-joint one while moving."""
    posture_std_standing: float = 0.05
    """The std (rad) of every joint in `posture` while told to stand."""
    posture_std_walking: tuple[tuple[str, float], ...] = ()
    """Per joint, the std (rad) in `posture` while moving: shell-style patterns and their std,
    the first match counting (e.g. "*knee*" 0.35 "*" 0.1); every actuated joint needs one."""

    # The weights are any finite numbers (penalties are negative).
    bounds: ClassVar[dict] = {
        "tracking_sigma": "> 0",
        "yaw_tracking_sigma": "> 0",
        "upright_sigma": "> 0",
        "posture_std_standing": "> 0",
        "feet_air_time_threshold": ">= 0",
        "feet_clearance_height": ">= 0",
        "feet_single_stance_threshold": ">= 0",
    }


@dataclasses.dataclass(frozen=True)
class GaitConfig:
    """A reference gait clock (Unitree's rl_gym and Humanoid-Gym give bipeds one): a phase that
    runs from 0 to 1 every `period_s` of the episode, observed by the actor and the critic as
    (sin, cos) of 2 pi phase, and a stance or swing phase per foot that `RewardConfig.feet_gait`
    rewards the feet for following. Off unless `foot_phase_offsets` names one offset per foot.
    The mirror image of a gait half a period on is the same gait when mirrored feet are offset
    by half a period (a biped's 0 and 0.5, a trot's 0, 0.5, 0.5, 0)."""

    foot_phase_offsets: tuple[float, ...] = ()
    """Per foot in `RobotConfig.foot_geoms` order: the phase (0 to 1) at which its stance begins."""
    period_s: float = 0.8
    """Duration of a gait cycle (s): a step of each foot."""
    stance_fraction: float = 0.55
    """Share of the cycle a foot spends on the ground; the rest is its swing."""
    swing_joint_offsets: tuple[tuple[str, float], ...] = ()
    """A reference swing for `RewardConfig.gait_joints`: shell-style joint name patterns and
    their offsets from home (rad) at mid-swing, the first match counting (e.g. "*hip_pitch*"
    -0.35 "*knee*" 0.7). Each joint moves with the one foot below it, by offset x sin(pi x
    swing progress) while that foot swings."""
    paid_joints: tuple[str, ...] = ("*",)
    """Shell-style patterns of the `swing_joint_offsets` joints whose reference
    `RewardConfig.gait_joints` pays for following while moving. The others are only fed forward
    (with `feedforward`) and free to leave the reference: a hip that a step-in-place reference
    holds at home in stance and at landing must sweep the leg back and reach forward to stride.
    Told to stand, every swing joint is paid for staying home."""
    feedforward: bool = False
    """Add the reference swing to the joint position targets: the policy's actions become
    corrections around legs that step in place with the clock (a residual policy, as Cassie's
    reference-motion controllers), instead of a swing it must discover. Its zero action steps;
    it learns to balance and stride."""

    bounds: ClassVar[dict] = {"foot_phase_offsets": "[0, 1)", "period_s": "> 0", "stance_fraction": "(0, 1)"}


@dataclasses.dataclass(frozen=True)
class RandomizationConfig:
    """Domain randomisation, reset distribution and pushes."""

    friction: tuple[float, float] = (0.5, 1.25)
    """Range of the sliding friction of the ground contacts, drawn per env at every reset."""
    base_mass_offset: tuple[float, float] = (-1.0, 1.0)
    """Range of the mass (kg) added to the base body, drawn per env at every reset."""
    joint_pos_noise: float = 0.1
    """Half-width of the uniform offset (rad) of the initial joint positions from home."""
    base_vel_noise: float = 0.5
    """Half-width of the uniform initial base linear (m/s) and angular (rad/s) velocity."""
    push_velocity: float = 0.5
    """Half-width of the uniform horizontal velocity change (m/s) of a push; 0 disables pushes."""
    push_interval_s: tuple[float, float] = (8.0, 12.0)
    """Time between pushes of an env, drawn uniformly from this range."""

    bounds: ClassVar[dict] = {
        "friction": (">= 0", "ordered"),
        "base_mass_offset": "ordered",
        "joint_pos_noise": ">= 0",
        "base_vel_noise": ">= 0",
        "push_velocity": ">= 0",
        "push_interval_s": ("> 0", "ordered"),
    }


@dataclasses.dataclass(frozen=True)
class HeightScanConfig:
    """Terrain heights around the base, seen by the actor (noisy) and the critic (clean)."""

    enabled: bool = False
    """Observe the height scan (rough-terrain tasks); off on flat ground."""
    size: tuple[float, float] = (1.6, 1.0)
    """Extent of the grid of points along the heading and across it (m): 17 x 11 = 187 points
    at 0.1 m, legged_gym's and mjlab's."""
    resolution: float = 0.1
    """Spacing of the points (m)."""
    std_floor: float = 0.2
    """The smallest std (m) the observation normaliser divides the scan by. On the flat rows
    where training starts the scan varies by a few centimetres, less than its noise, and scaled
    up to unit variance its 187 noisy columns outweighed the 48 others in the actor's first layer
    (docs/benchmarks.md). 0.2 m scales the scan as legged_gym does (heights times 5, no
    normaliser) until the terrain varies by more."""

    bounds: ClassVar[dict] = {"size": ">= 0", "resolution": "> 0", "std_floor": ">= 0"}


@dataclasses.dataclass(frozen=True)
class ActorObsConfig:
    """What the actor observes, for policies that must run on a real robot (distilled students)."""

    base_lin_vel: bool = True
    """The base's linear velocity: simulators know it, real robots estimate it. The critic and
    a teacher always see it."""
    height_scan: bool = True
    """The height scan, where the task has one (rough terrain): a blind policy goes without and
    feels the ground through its joints (a memory, or `history`, to remember it by)."""
    history: int = 1
    """Steps of the proprioceptive terms (angular velocity, gravity, joints, last action) in
    the actor's observation, newest first: without its velocity, a policy reads motion from them."""
    teacher_group: bool = False
    """Add a "teacher" observation group, the actor observations of the default task without
    noise: what a teacher trained on that task reads (`--algorithm.teacher`)."""

    bounds: ClassVar[dict] = {"history": ">= 1"}


@dataclasses.dataclass(frozen=True)
class VelocityEnvConfig(EnvConfig):
    """A legged robot tracking velocity commands on flat ground or a terrain grid."""

    robot: RobotConfig = RobotConfig(mjcf="")
    """The robot: its MJCF and the names of its base, joints, feet and contact geoms."""
    terrain: TerrainConfig = TerrainConfig()
    """The ground, composed into the scene with the robot: flat, or a grid of rising difficulty
    with a curriculum (`--env.terrain.kind grid`)."""
    height_scan: HeightScanConfig = HeightScanConfig()
    """The height-scan observation."""
    actor_obs: ActorObsConfig = ActorObsConfig()
    """What the actor observes (the default: everything the critic's proprioception has)."""
    episode_length_s: float = 20.0
    """Episode length in seconds (1000 env steps at 50 Hz)."""
    action_scale: float = 0.25
    """Joint position target = home + action_scale * action (rad per unit action)."""
    action_clip: float = 100.0
    """As legged_gym: effectively unclipped; the actuators' ctrlrange (the joint range) bounds targets."""
    max_tilt_rad: float = 1.0
    """The episode ends when the base's up axis is tilted more than this from vertical."""
    commands: CommandConfig = CommandConfig()
    """Velocity command distribution."""
    noise: ObsNoiseConfig = ObsNoiseConfig()
    """Actor observation noise."""
    rewards: RewardConfig = RewardConfig()
    """Reward weights."""
    gait: GaitConfig = GaitConfig()
    """The reference gait clock (off by default)."""
    randomization: RandomizationConfig = RandomizationConfig()
    """Domain randomisation and pushes."""
    sim: SimConfig = SimConfig(decimation=4, timestep=0.005, per_world_model_fields=("geom_friction", "body_mass"))
    """Physics settings; a robot sets its own contact-buffer sizes (`nconmax`, `njmax`)."""

    bounds: ClassVar[dict] = {"max_tilt_rad": "> 0"}


# PPO settings of the velocity task, for every robot (rsl_rl's and mjlab's for legged robots).
AGENT = AgentConfig(
    runner=RunnerConfig(num_steps_per_env=24, max_iterations=1500, save_interval=100, eval_interval=50),
    algorithm=PpoConfig(
        warm_up_normalizers=True,
        # The adaptive schedule's starting point. Adam's first steps move every weight by about
        # the rate whatever the gradient, and at 1e-3 iteration 0's KL was 3.3x the later median
        # (256 envs); at 3e-4 it is 1.4x. The schedule settles at 4e-5 to 3e-4 within a few
        # minibatch steps either way (docs/benchmarks.md, "The KL guard").
        learning_rate=3e-4,
        schedule="adaptive",
        desired_kl=0.01,
        num_learning_epochs=5,
        num_mini_batches=4,
        clip_param=0.2,
        entropy_coef=0.01,
        gamma=0.99,
        lam=0.95,
    ),
    policy=PolicyConfig(
        actor_hidden_dims=(512, 256, 128), critic_hidden_dims=(512, 256, 128), activation="elu", init_noise_std=1.0
    ),
)


# Distillation: the student learns the mean action of its teacher with a small fixed noise
# (Distillation trains the actor's mean only, so the std stays where it starts).
STUDENT_AGENT = AGENT.replace(init_noise_std=0.1)
# The rough tasks train with symmetry augmentation. Without it the Go1's rough policy walked on
# three legs (rear-left foot down 0.4 % of the time after 33 M env steps) and failed the hardest
# stairs and slopes; on flat ground augmentation removed the same limp and halved the env steps
# to the targets (docs/benchmarks.md, "The quadruped over seeds"). The flat tasks keep plain PPO,
# as rsl_rl and mjlab, so their published figures stand.
ROUGH_AGENT = AGENT.replace(symmetry=SymmetryConfig(augment=True))


def as_student(env: VelocityEnvConfig, history: int = 5, height_scan: bool = True) -> VelocityEnvConfig:
    """The env of a student for distillation: no base linear velocity, `history` steps of
    proprioception, the height scan or not (blind), and the teacher's observations beside them."""
    view = ActorObsConfig(base_lin_vel=False, height_scan=height_scan, history=history, teacher_group=True)
    return dataclasses.replace(env, actor_obs=view)


def on_rough_terrain(flat: VelocityEnvConfig) -> VelocityEnvConfig:
    """What turns a flat velocity task into its rough one: a terrain grid with the curriculum, the
    height scan, and heading commands (straight walks, which the curriculum can judge). Rewards,
    terminations and PPO settings stay the flat task's. On the heightfield a geom touches up to 4
    of its triangles, not 1 plane: 40 contacts and 128 constraint rows cover what
    `scripts/bench_quadruped.py --check-buffers` saw with margin."""
    return dataclasses.replace(
        flat,
        terrain=TerrainConfig(kind="grid"),
        height_scan=HeightScanConfig(enabled=True),
        commands=CommandConfig(heading=True),
        sim=dataclasses.replace(flat.sim, nconmax=40, njmax=128),
    )
