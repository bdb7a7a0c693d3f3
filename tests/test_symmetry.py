"""Left-right symmetry: how a task's observations and actions mirror (declared by term and joint
names), checked against the simulator by really mirroring the robot's state."""

from __future__ import annotations

import dataclasses
import math
import types
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, last_json, run_main

from mjrl.distributed.context import single_process
from mjrl.envs import Robot, VecEnv, symmetry_problem
from mjrl.envs import terms as mdp
from mjrl.errors import UsageError
from mjrl.metrics_file import read_metrics
from mjrl.mirror import ColumnMirror
from mjrl.obs_spec import flat_spec
from mjrl.rl import PpoConfig, SymmetryConfig, check_agent_config, make_algorithm
from mjrl.rl.algorithm import Transition
from mjrl.rl.config import PolicyConfig, SacConfig
from mjrl.rl.networks import ActorCritic
from mjrl.rl.ppo import PPO
from mjrl.rl.sac import SAC
from mjrl.tasks import load_task
from mjrl.tasks.velocity.commands import COMMAND
from mjrl.tasks.velocity.gait import GaitClock, feet_gait

N = 3  # original states; envs N..2N-1 hold their mirror images


def flat_env(task_name: str) -> VecEnv:
    task = load_task(task_name)
    cfg = dataclasses.replace(task.env_cfg, num_envs=2 * N, obs_noise=False, random_initial_episode_length=False)
    return VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=3)


def mirror_robot_state(env: VecEnv) -> None:
    """Write into envs N..2N-1 the mirror image (in the world's x-z plane) of envs 0..N-1: the
    base's pose and velocity, the joints, the last action, the command, and the randomised
    model fields the critic observes."""
    robot, sim = env.robot, env.sim
    joints = robot.joint_mirror
    mirrored = slice(N, 2 * N)
    p, d = robot.base_qpos, robot.base_dof
    qpos, qvel = sim.qpos[:N].clone(), sim.qvel[:N].clone()
    qpos[:, p + 1] *= -1  # y
    qpos[:, p + 3 : p + 7] *= torch.tensor([1.0, -1.0, 1.0, -1.0])  # (w, x, y, z) -> (w, -x, y, -z)
    qpos[:, robot.joint_qpos] = joints(sim.qpos[:N, robot.joint_qpos])
    qvel[:, d + 1] *= -1  # world-frame linear velocity: y flips
    qvel[:, d + 3 : d + 6] *= torch.tensor([-1.0, 1.0, -1.0])  # body-frame angular velocity
    qvel[:, robot.joint_dof] = joints(sim.qvel[:N, robot.joint_dof])
    sim.qpos[mirrored], sim.qvel[mirrored] = qpos, qvel
    env.actions[mirrored] = joints(env.actions[:N])
    command = env.commands[COMMAND]
    signs = torch.tensor([1.0, -1.0, -1.0, -1.0])  # vx, vy, yaw rate and a heading if there is one
    command[mirrored] = command[:N] * signs[: command.shape[1]]
    for field in ("body_mass", "geom_friction"):
        sim.model_field(field)[mirrored] = sim.model_field(field)[:N]
    if gait := env.cfg.gait.foot_phase_offsets:  # the same gait half a period on, feet swapped
        assert sorted(gait) == [0.0, 0.5]
        env.episode_length[mirrored] = env.episode_length[:N] + round(env.cfg.gait.period_s / 2 / env.step_dt)
    sim.forward()
    env.after_physics()


@pytest.mark.parametrize(
    "task_name", ["Mjrl-Velocity-Flat-Quadruped", "Mjrl-Velocity-Flat-Mule", "Mjrl-Velocity-Flat-Humanoid"]
)
def test_the_mirrored_observation_of_a_mirrored_state_is_the_observation_of_the_state(task_name):
    env = flat_env(task_name)
    torch.manual_seed(0)
    for _ in range(15):  # a state with velocities, a tilt and feet in the air
        env.step(0.8 * torch.randn(env.num_envs, env.num_actions))
    env.commands[COMMAND][:N, :3] = torch.tensor([[0.7, 0.3, -0.5], [-0.2, -0.6, 0.8], [1.0, 0, 0]])
    mirror_robot_state(env)
    obs = env.compute_obs()
    assert 0 < env.state.contacts[:N].float().mean() < 1  # some feet touch, some do not
    for group in ("actor", "critic"):
        mirror = env.mirrors[group]
        assert mirror.width == env.obs_dims[group]
        torch.testing.assert_close(mirror(obs[group][:N]), obs[group][N:], atol=2e-4, rtol=1e-4)
        # The check is not vacuous: the state and its image look different.
        assert (obs[group][:N] - obs[group][N:]).abs().max() > 0.1
    if env.cfg.gait.foot_phase_offsets:  # the image follows the reference gait as the state does
        env.commands[COMMAND][:, :3] = torch.tensor([0.5, 0.0, 0.0])
        clock = GaitClock.of(env.cfg.gait)
        stance = clock.in_stance(env)
        assert torch.equal(stance[N:], stance[:N].flip(1)) and not torch.equal(stance[N:], stance[:N])
        torch.testing.assert_close(feet_gait(env, clock)[N:], feet_gait(env, clock)[:N])


@pytest.mark.parametrize("task_name", ["Mjrl-Velocity-Flat-Quadruped", "Mjrl-Velocity-Rough-Mule"])
def test_mirroring_twice_gives_every_vector_back(task_name):
    task = load_task(task_name)
    cfg = dataclasses.replace(task.env_cfg, num_envs=2)
    if cfg.terrain.kind == "grid":
        cfg = dataclasses.replace(cfg, terrain=dataclasses.replace(cfg.terrain, rows=2, columns_per_type=1))
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=0)
    assert set(env.mirrors) == {"actions", "actor", "critic"}
    for name, mirror in env.mirrors.items():
        x = torch.randn(5, mirror.width)
        assert torch.equal(mirror(mirror(x)), x), name
        assert not torch.equal(mirror(x), x), name


def test_the_height_scan_mirror_reflects_every_point_across_the_heading():
    """The scan at a point depends only on where the point is, so the image of point k must be
    the point at k's offset reflected across the heading (y -> -y)."""
    scan = mdp.HeightScan((1.6, 1.0), 0.1)
    offsets = mdp.scan_offsets(scan.size, scan.resolution, torch.device("cpu"))
    mirror = scan.mirror(None, offsets.shape[0])
    torch.testing.assert_close(offsets[mirror.source], offsets * torch.tensor([1.0, -1.0]))
    assert torch.all(mirror.sign == 1)


def test_a_robot_without_mirror_names_gives_a_task_without_symmetry():
    task = load_task("Mjrl-Velocity-Flat-Quadruped")
    robot = dataclasses.replace(task.env_cfg.robot, mirror_names=())
    cfg = dataclasses.replace(task.env_cfg, num_envs=1, robot=robot)
    assert VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=0).mirrors is None


def test_wrong_mirror_names_and_an_asymmetric_home_pose_are_named_when_symmetry_is_asked_for(log_root):
    task = load_task("Mjrl-Velocity-Flat-Quadruped")
    go1 = task.env_cfg.robot
    model, _ = task.build(task.env_cfg).scene.build()

    def mirror_error(**changes) -> str | None:
        robot = Robot.resolve(model, dataclasses.replace(go1, **changes), torch.device("cpu"))
        assert (robot.joint_mirror is None) == (robot.mirror_error is not None)
        return robot.mirror_error

    assert "'FL_hip_joint' is 'FX_hip_joint'" in mirror_error(mirror_names=(("FL", "FX"),))
    assert "'FR_hip_joint' and 'FR_thigh_joint' do not move about mirrored axes" in mirror_error(
        mirror_names=(("hip", "thigh"),)
    )
    assert mirror_error() is None
    model.key_qpos[0, 7] = 0.1  # the FR hip abducted, the FL hip not
    assert "home pose is not mirror-symmetric at joint 'FR_hip_joint'" in mirror_error()
    # A run without symmetry does not need the mirror; one with it is told why it cannot.
    feet = ["--env.robot.foot-geoms", "FR_foot", "FL_foot", "RR_foot"]
    refused = run_main("train", task.name, *TINY_RUN, *feet, "--algorithm.symmetry.augment", "True",
                       "--log-root", str(log_root))  # fmt: skip
    assert refused.returncode == 2 and "'RL_foot', which foot_geoms does not list" in refused.stderr
    assert not log_root.exists()
    plain = run_main("train", task.name, *TINY_RUN, *feet, "--runner.max-iterations", "1", "--log-root", str(log_root))
    assert plain.returncode == 0, plain.stderr[-2000:]


def test_a_column_mirror_that_is_no_reflection_is_refused():
    with pytest.raises(ValueError, match="twice"):
        ColumnMirror(torch.tensor([1, 2, 0]), torch.ones(3)).check("a rotation")
    with pytest.raises(ValueError, match="signs"):
        ColumnMirror(torch.tensor([1, 0]), torch.tensor([1.0, -1.0])).check("a swap with one sign")


# ----------------------------------------------------------------------------- the learner

# A toy left-right symmetric problem: observations (forward, lateral), actions (lateral).
TOY_MIRRORS = {
    "actor": ColumnMirror(torch.tensor([0, 1]), torch.tensor([1.0, -1.0])),
    "critic": ColumnMirror(torch.tensor([0, 1]), torch.tensor([1.0, -1.0])),
    "actions": ColumnMirror(torch.tensor([0]), torch.tensor([-1.0])),
}


def toy_ppo(symmetry: SymmetryConfig, num_envs: int, seed: int = 0) -> PPO:
    torch.manual_seed(seed)
    policy = ActorCritic(2, 2, 1, (16, 16), (16, 16), "elu", 0.5, normalize=True)
    cfg = PpoConfig(num_learning_epochs=1, num_mini_batches=1, schedule="fixed", symmetry=symmetry)
    ppo = PPO(policy, cfg, single_process("cpu"), num_envs, 6, TOY_MIRRORS if symmetry.enabled else None)
    ppo.generator.manual_seed(seed)
    return ppo


def toy_step(algorithm: PPO | SAC, num_envs: int, g: torch.Generator) -> torch.Tensor:
    """One step of the toy problem from states whose lateral coordinate is always positive,
    given to `algorithm`; returns the observations."""
    obs = torch.rand(num_envs, 2, generator=g) + torch.tensor([0.0, 0.5])
    actions = algorithm.act({"actor": obs, "critic": obs})
    rewards = -((actions[:, 0] + obs[:, 1]) ** 2)  # steer against the lateral offset
    done = torch.zeros_like(rewards, dtype=torch.bool)
    groups = {"actor": obs, "critic": obs}
    algorithm.process_env_step(Transition(groups, actions, rewards, done, done, groups, groups))
    return obs


def toy_rollout(ppo: PPO, seed: int) -> None:
    """Fill the buffer with toy steps."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(6):
        obs = toy_step(ppo, ppo.storage.actions.shape[1], g)
    ppo.compute_returns({"critic": obs})


def test_augmentation_trains_on_each_sample_and_its_mirror_image_with_the_originals_returns():
    """One augmented update equals a plain update on the rollout plus its mirror image (mirrored
    observations and actions, the originals' log-probabilities, values and rewards)."""
    augmented = toy_ppo(SymmetryConfig(augment=True), num_envs=8)
    toy_rollout(augmented, seed=1)
    buf = augmented.storage
    plain = toy_ppo(SymmetryConfig(), num_envs=16)
    doubled = plain.storage
    for name in ("actor_obs", "critic_obs", "actions", "log_probs", "values", "rewards", "dones", "action_mean"):
        ours = getattr(buf, name)
        image = {"actor_obs": TOY_MIRRORS["actor"], "critic_obs": TOY_MIRRORS["critic"]}.get(name)
        image = image or (TOY_MIRRORS["actions"] if name in ("actions", "action_mean") else None)
        getattr(doubled, name).copy_(torch.cat([ours, image(ours) if image else ours], dim=1))
    doubled.action_std.copy_(torch.cat([buf.action_std, buf.action_std], dim=1))
    plain.policy.load_state_dict(augmented.policy.state_dict())
    plain.update_on(doubled, torch.cat([augmented.last_values, augmented.last_values]))
    augmented.update()
    for a, b in zip(augmented.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    assert not torch.equal(augmented.policy.log_std, torch.full_like(augmented.policy.log_std, math.log(0.5)))


def symmetry_error(algorithm: PPO | SAC) -> float:
    """How far the policy's mean on mirrored observations is from the mirrored mean, over the
    states the rollouts visit."""
    obs = torch.rand(256, 2, generator=torch.Generator().manual_seed(9)) + torch.tensor([0.0, 0.5])
    with torch.no_grad():
        mean = algorithm.policy.act_deterministic(obs)
        mirrored = algorithm.policy.act_deterministic(TOY_MIRRORS["actor"](obs))
    return float(((mirrored - TOY_MIRRORS["actions"](mean)) ** 2).mean())


def test_the_mirror_loss_makes_the_policy_symmetric_and_is_logged():
    with_loss = toy_ppo(SymmetryConfig(mirror_loss_coef=1.0), num_envs=32)
    without = toy_ppo(SymmetryConfig(), num_envs=32)
    logged = []
    for iteration in range(30):
        for ppo in (with_loss, without):
            toy_rollout(ppo, seed=100 + iteration)
            totals = {**ppo.update(), **ppo.log_values()}  # as the runner's gather pools them
            metrics = ppo.update_metrics({k: float(v) for k, v in totals.items()})
            if ppo is with_loss:
                logged.append(metrics["symmetry_loss"])
            else:
                assert "symmetry_loss" not in metrics
    assert symmetry_error(with_loss) < 0.1 * symmetry_error(without)
    assert 0 < logged[-1] < 0.1 * symmetry_error(without)


def test_a_task_that_does_not_say_how_a_term_mirrors_is_refused_symmetry():
    task = load_task("Mjrl-Cartpole-Balance")
    spec = task.build(task.env_cfg)
    assert symmetry_problem(spec) is None
    actor = {**spec.observations["actor"]}
    actor["cart_position"] = dataclasses.replace(actor["cart_position"], mirror=None)
    spec = dataclasses.replace(spec, observations={**spec.observations, "actor": actor})
    assert symmetry_problem(spec) == "it does not say how actor.cart_position mirror"
    agent = task.agent_cfg
    assert agent.algorithm.symmetry.augment  # Balance trains with its mirror images by default
    with pytest.raises(UsageError) as refused:
        check_agent_config(agent, task.name, set(spec.observations), lambda: symmetry_problem(spec))
    assert str(refused.value) == (
        "--algorithm.symmetry needs a task that mirrors left and right; "
        "Mjrl-Cartpole-Balance: it does not say how actor.cart_position mirror"
    )
    plain = agent.replace(symmetry=SymmetryConfig())
    check_agent_config(plain, task.name, set(spec.observations), lambda: symmetry_problem(spec))


@pytest.mark.parametrize("task_name", ["Mjrl-Cartpole-Balance", "Mjrl-Cartpole-Swingup"])
def test_the_cart_pole_and_its_mirror_image_move_as_mirror_images(task_name):
    """Envs N..2N-1 start as the mirror images (about x = 0) of envs 0..N-1 and are pushed with
    the mirrored actions: their observations stay the mirrored ones, and their rewards equal."""
    task = load_task(task_name)
    cfg = dataclasses.replace(task.env_cfg, num_envs=2 * N, obs_noise=False, random_initial_episode_length=False)
    env = VecEnv(cfg, task.build(cfg), torch.device("cpu"), seed=3)
    # The pole leans 1 mrad off its hinge axis (dm_control's, so that it does not stand by
    # itself); upright, that is 10 times below the angle's observation noise, but a chaotic
    # system grows it. Stood straight, the model is exactly symmetric.
    pole_com = env.sim.model_field("body_ipos")[..., env.sim.mj_model.body("pole").id, :]
    assert pole_com[..., 0].abs().max() == pytest.approx(0.0005)
    pole_com[..., 0] = 0.0
    torch.manual_seed(0)
    for _ in range(10):  # a state with velocities, the pole away from its start
        env.step(torch.randn(env.num_envs, 1))
    env.sim.qpos[N:], env.sim.qvel[N:] = -env.sim.qpos[:N], -env.sim.qvel[:N]
    env.sim.forward()
    env.after_physics()
    obs = env.compute_obs()
    mirror = env.mirrors["actor"]
    assert (obs["actor"][:N] - obs["actor"][N:]).abs().max() > 0.1  # the image looks different
    torch.testing.assert_close(mirror(obs["actor"][:N]), obs["actor"][N:])
    for _ in range(20):
        push = torch.randn(N, 1)
        obs, reward, *_ = env.step(torch.cat([push, env.mirrors["actions"](push)]))
        torch.testing.assert_close(mirror(obs["actor"][:N]), obs["actor"][N:], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(reward[:N], reward[N:], atol=1e-6, rtol=1e-6)
    assert env.mirrors["critic"] is not None and torch.equal(mirror(mirror(obs["actor"])), obs["actor"])


@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_the_quadruped_trains_with_augmentation_and_the_mirror_loss_and_logs_it(log_root, algo):
    tiny = TINY_RUN if algo == "ppo" else (*TINY_RUN[:-2], "--algo", "sac", "--algorithm.batch-size", "64",
                                           "--algorithm.buffer-steps", "16")  # fmt: skip
    result = run_main("train", "Mjrl-Velocity-Flat-Quadruped", *tiny, "--runner.max-iterations", "2",
                      "--algorithm.symmetry.augment", "True", "--algorithm.symmetry.mirror-loss-coef", "0.1",
                      "--log-root", str(log_root))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(Path(last_json(result.stdout)["run_dir"]) / "metrics.jsonl")
    assert [row["iteration"] for row in rows] == [0, 1]
    assert all(0 < row["symmetry_loss"] < 100 for row in rows)


# ------------------------------------------------------------------------------ SAC's symmetry


@dataclasses.dataclass
class ToyEnv:
    """The toy problem's shapes and mirrors, as an algorithm is built from them (`EnvInfo`)."""

    num_envs: int
    num_actions: int = 1
    obs_dims: dict = dataclasses.field(default_factory=lambda: {"actor": 2, "critic": 2})
    obs_std_floors: dict = dataclasses.field(default_factory=lambda: {"actor": None, "critic": None})
    mirrors: dict = dataclasses.field(default_factory=lambda: TOY_MIRRORS)
    mirror_problem: None = None

    @property
    def obs_spec(self) -> dict:
        return flat_spec(self.obs_dims)


def toy_sac(symmetry: SymmetryConfig, num_envs: int = 16, seed: int = 0) -> SAC:
    sac = SacConfig(
        batch_size=32, buffer_steps=64, learning_starts=2, updates_per_step=1, learning_rate=3e-3, symmetry=symmetry
    )
    policy = PolicyConfig(actor_hidden_dims=(16, 16), critic_hidden_dims=(16, 16))
    sections = types.SimpleNamespace(algo="sac", algorithm=sac, policy=policy)
    return make_algorithm(sections, ToyEnv(num_envs), 1, single_process("cpu"), seed=seed)


def toy_sac_steps(sac: SAC, seed: int, steps: int = 6) -> None:
    """Toy steps, an update after each."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        toy_step(sac, sac.num_envs, g)
        sac.update()


def test_sac_augmentation_follows_each_window_with_its_mirror_image_and_the_same_return():
    """Each augmented gradient step reads the sampled windows, then their mirror images: the
    first and the next observations and the actions mirrored, the returns and discounts kept."""
    augmented, plain = toy_sac(SymmetryConfig(augment=True)), toy_sac(SymmetryConfig())
    toy_sac_steps(augmented, seed=1)
    rows = augmented.ring.window_rows(8, 3, augmented.num_envs, torch.Generator().manual_seed(2))
    plain.ring.load_state_dict(augmented.ring.state_dict())
    doubled, single = augmented._windows(rows), plain._windows(rows)
    images = {"actor": TOY_MIRRORS["actor"], "next_actor": TOY_MIRRORS["actor"], "critic": TOY_MIRRORS["critic"],
              "next_critic": TOY_MIRRORS["critic"], "action": TOY_MIRRORS["actions"]}  # fmt: skip
    assert set(doubled) == set(single)
    for name, x in single.items():
        assert torch.equal(doubled[name][:8], x)
        assert torch.equal(doubled[name][8:], images[name](x) if name in images else x), name
    assert augmented.batch_rows == 64 and plain.batch_rows == 32
    assert (doubled["actor"][8:, 1] < 0).all()  # the images sit where no robot went


def test_sacs_mirror_loss_makes_its_actor_symmetric_and_is_logged():
    """With the mirror loss (alone, or beside augmentation) the actor's mean on mirrored states
    becomes the mirror image of its mean; without, it does not; only the former log the loss."""
    runs = {"loss": SymmetryConfig(mirror_loss_coef=1.0), "loss and augmentation":
            SymmetryConfig(augment=True, mirror_loss_coef=1.0), "none": SymmetryConfig()}  # fmt: skip
    logged = {}
    for name, symmetry in runs.items():
        runs[name] = sac = toy_sac(symmetry)
        for iteration in range(12):
            toy_sac_steps(sac, seed=100 + iteration)
        metrics = sac.update_metrics({k: float(v) for k, v in {**sac.update(), **sac.log_values()}.items()})
        logged[name] = metrics.get("symmetry_loss")
    unconstrained = symmetry_error(runs["none"])
    assert logged["none"] is None
    for name in ("loss", "loss and augmentation"):
        assert symmetry_error(runs[name]) < 0.1 * unconstrained, name
        assert 0 < logged[name] < 0.1 * unconstrained, name
