"""Terrain: the generator, scenes composed from a robot and a terrain, heights as MuJoCo sees
them, the height scan, spawn points, the curriculum at episode ends and the rough task's CLI."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import TINY_RUN, TWO_RANK_RUN, last_json, run_main

from mjrl.checkpoint import load_checkpoint
from mjrl.envs import Robot, VecEnv
from mjrl.envs import terms as mdp
from mjrl.envs.terrain import TerrainState
from mjrl.errors import UsageError
from mjrl.metrics_file import read_metrics
from mjrl.sim import Scene, TerrainConfig, generate_terrain, register_terrain_type, terrain_types
from mjrl.tasks import load_task
from mjrl.tasks.velocity.commands import COMMAND

ROUGH = load_task("Mjrl-Velocity-Rough-Quadruped")
# A small grid (3 rows x 5 types of 4 m patches) builds and steps fast.
SMALL = TerrainConfig(
    kind="grid", rows=3, columns_per_type=1, patch_size=4.0, platform=1.0, border=1.0, spawn_jitter=0.3
)


def ray_heights(model: mujoco.MjModel, xy: np.ndarray) -> np.ndarray:
    """Terrain height under each point by casting MuJoCo's own ray straight down onto the
    terrain (geom group of static geoms only: the robot is not hit)."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    hits, geom = [], np.zeros(1, np.int32)
    for x, y in xy.reshape(-1, 2):
        distance = mujoco.mj_ray(model, data, np.array([x, y, 10.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geom)
        assert distance >= 0 and geom[0] == 0, (x, y)  # the terrain is geom 0
        hits.append(10.0 - distance)
    return np.array(hits).reshape(xy.shape[:-1])


# ------------------------------------------------------------------------------ generator


def test_the_same_seed_and_settings_give_the_same_heights():
    first, again = generate_terrain(SMALL), generate_terrain(SMALL)
    assert first.digest() == again.digest()
    assert generate_terrain(dataclasses.replace(SMALL, seed=1)).digest() != first.digest()
    assert generate_terrain(dataclasses.replace(SMALL, step_height=(0.02, 0.12))).digest() != first.digest()


def test_the_hardest_row_is_as_hard_as_configured_and_patches_join_at_height_zero():
    cfg = TerrainConfig(kind="grid", columns_per_type=1)
    grid = generate_terrain(cfg)
    cells, border = round(cfg.patch_size / cfg.resolution), round(cfg.border / cfg.resolution)
    top = border + (cfg.rows - 1) * cells

    def patch(kind: str) -> np.ndarray:
        col = border + grid.column_types.index(kind) * cells
        return grid.heights[top : top + cells, col : col + cells].astype(np.float64)

    stairs = patch("stairs_up")
    assert np.abs(np.diff(stairs, axis=0)).max() == pytest.approx(0.10, abs=1e-6)  # one riser
    assert stairs.min() < -0.5 and stairs.max() == 0.0  # a pit, its rim at 0
    assert patch("stairs_down").max() > 0.5
    slope = patch("slope_up")
    assert np.abs(np.diff(slope, axis=0)).max() / cfg.resolution == pytest.approx(0.4, rel=1e-4)
    rough = patch("rough")
    assert 0.04 < np.abs(rough).max() <= 0.05
    for kind in ("slope_up", "slope_down", "stairs_up", "stairs_down"):
        edge = patch(kind)
        assert np.abs(edge[0]).max() < 0.05 and np.abs(edge[:, -1]).max() < 0.05, kind
    assert np.all(grid.heights[:border] == 0) and np.all(grid.heights[:, -border:] == 0)  # flat border


def test_height_at_is_the_heightfield_mujoco_collides_with():
    model, grid = Scene(ROUGH.env_cfg.robot.mjcf_file, SMALL).build()
    state = TerrainState(SMALL, grid, 1, torch.device("cpu"), torch.Generator().manual_seed(0))
    rng = np.random.default_rng(0)
    low, high = np.array(grid.origin), np.array(grid.origin) + np.array(grid.extent)
    xy = rng.uniform(low + 0.01, high - 0.01, (400, 2))
    ours = state.height_at(torch.tensor(xy, dtype=torch.float32)).numpy()
    assert np.abs(ours - ray_heights(model, xy)).max() < 1e-3
    assert np.ptp(ours) > 0.5  # the points did land on stairs and slopes
    # A diverged world's NaN or infinite position reads some height, not an index off the grid.
    odd = state.height_at(torch.tensor([[math.nan, 0.0], [math.inf, -math.inf], [1e30, 0.0]]))
    assert torch.isfinite(odd).all()


# ------------------------------------------------------------------------------ scenes


def test_any_robot_walks_on_any_terrain_and_a_robot_file_with_a_floor_is_refused(tmp_path):
    mule = load_task("Mjrl-Velocity-Flat-Mule").env_cfg.robot
    for terrain in (TerrainConfig(), SMALL):
        model, _ = Scene(mule.mjcf_file, terrain).build()
        robot = Robot.resolve(model, mule, torch.device("cpu"))
        assert robot.ground_geom == 0 and model.geom_conaffinity[0] == 1 and model.geom_contype[0] == 0
    with_floor = tmp_path / "with_floor.xml"
    text = mule.mjcf_file.read_text()
    with_floor.write_text(text.replace("<worldbody>", '<worldbody>\n<geom name="ground" type="plane" size="0 0 1"/>'))
    with pytest.raises(UsageError, match=re.escape("has geoms in its worldbody (ground)")):
        Scene(with_floor, TerrainConfig()).build()
    with pytest.raises(UsageError, match=re.escape("--env.terrain.spawn-type lava")):
        Scene(mule.mjcf_file, dataclasses.replace(SMALL, spawn_type="lava")).build()


# ------------------------------------------------------------------------------ curriculum


def test_the_curriculum_promotes_demotes_and_sends_envs_past_the_top_row_to_a_random_one():
    grid = generate_terrain(SMALL)
    state = TerrainState(SMALL, grid, 6, torch.device("cpu"), torch.Generator().manual_seed(0))
    state.level = torch.tensor([1, 1, 1, 2, 0, 1])
    ended = torch.tensor([True, True, True, True, True, False])
    distance = torch.tensor([2.5, 1.0, 1.5, 2.5, 0.0, 9.0])  # half a patch is 2 m
    commanded = torch.tensor([10.0, 10.0, 2.0, 10.0, 10.0, 10.0])
    state.end_episodes(ended, distance, commanded)
    level = state.level.tolist()
    assert level[:3] == [2, 0, 1]  # promoted, demoted, kept (1.5 m >= half of 2 m)
    assert 0 <= level[3] < 3  # past the top row: a random row
    assert level[4] == 0 and level[5] == 1  # no row below 0; an env still running is not judged
    assert state.last_distance.tolist()[:5] == distance.tolist()[:5] and state.last_distance[5] == 0
    gauges = {name: (total / count).item() for name, (total, count) in state.gauges().items()}
    assert gauges["terrain/promoted_off_top"] == pytest.approx(1 / 5)
    assert gauges["terrain/promoted_off_top/" + grid.column_types[3]] == 1.0
    assert gauges["terrain/mean_level"] == pytest.approx(sum(level) / 6)
    assert gauges["terrain/mean_distance"] == pytest.approx(7.5 / 5)
    assert gauges["terrain/mean_commanded_distance"] == pytest.approx(42 / 5)
    assert (gauges["terrain/promoted"], gauges["terrain/demoted"]) == (pytest.approx(2 / 5), pytest.approx(2 / 5))
    assert math.isnan(state.gauges()["terrain/promoted_off_top"].div(0).sum())  # counters were reset


def ridge(cfg: TerrainConfig, difficulty: float, x: np.ndarray, y: np.ndarray, rng: np.random.Generator):
    """A test's terrain type: a square ridge halfway between the platform and the edge, 5 to 15
    cm high from the first row to the last; flat elsewhere."""
    ring = (cfg.patch_size + cfg.platform) / 4
    on_ridge = np.abs(np.maximum(np.abs(x), np.abs(y)) - ring) < 1.5 * cfg.resolution
    return np.where(on_ridge, 0.05 + 0.10 * difficulty, 0.0)


def test_a_terrain_type_registered_by_a_test_is_generated_and_served_by_the_curriculum(log_root):
    register_terrain_type("test_ridge", ridge)
    assert terrain_types()[:5] == ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down")
    cfg = dataclasses.replace(SMALL, types=("rough", "test_ridge"), spawn_type="test_ridge")
    grid = generate_terrain(cfg)
    assert grid.column_types == ("rough", "test_ridge")
    cells, border = round(cfg.patch_size / cfg.resolution), round(cfg.border / cfg.resolution)
    last_row = grid.heights[border + 2 * cells : border + 3 * cells, border + cells : border + 2 * cells]
    assert last_row.max() == pytest.approx(0.15)
    state = TerrainState(cfg, grid, 4, torch.device("cpu"), torch.Generator().manual_seed(0))
    assert state.column.tolist() == [1, 1, 1, 1]  # every env spawns on the ridge's column
    state.level.copy_(torch.tensor([0, 1, 0, 1]))
    state.end_episodes(torch.ones(4, dtype=torch.bool), torch.full((4,), 3.0), torch.full((4,), 4.0))
    assert state.level.tolist() == [1, 2, 1, 2]  # walked past half a patch: promoted
    assert state.gauges()["terrain/mean_level/test_ridge"].tolist() == [6.0, 4.0]
    # Through the CLI, flag and all: trained, and logged per type.
    small = ["--env.terrain.rows", "3", "--env.terrain.columns-per-type", "1", "--env.terrain.patch-size", "4",
             "--env.terrain.platform", "1", "--env.terrain.border", "1"]  # fmt: skip
    result = run_main("train", ROUGH.name, *TINY_RUN, "--env.num-envs", "8", "--runner.max-iterations", "2",
                      "--runner.eval-interval", "0", *small, "--env.terrain.types", "rough", "test_ridge",
                      "--log-root", str(log_root))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_metrics(Path(last_json(result.stdout)["run_dir"]) / "metrics.jsonl")
    assert 0 <= rows[-1]["terrain/mean_level/test_ridge"] <= 2
    unknown = run_main("train", ROUGH.name, *TINY_RUN, "--env.terrain.types", "moon", "--log-root", str(log_root))
    assert unknown.returncode == 2 and "test_ridge" in unknown.stderr  # the registered types are named


# ------------------------------------------------------------------------------ the rough env


@pytest.fixture(scope="module")
def rough_env() -> VecEnv:
    cfg = dataclasses.replace(ROUGH.env_cfg, num_envs=5, terrain=SMALL, random_initial_episode_length=False,
                              obs_noise=False)  # fmt: skip
    return VecEnv(cfg, ROUGH.build(cfg), torch.device("cpu"), seed=0)


def test_robots_spawn_on_their_patch_with_their_feet_on_the_terrain(rough_env):
    env = rough_env
    env.reset()
    center = env.terrain.patch_center()
    base = env.sim.qpos[:, :3]
    assert torch.all((base[:, :2] - center[:, :2]).abs() <= SMALL.spawn_jitter + 1e-5)
    assert torch.allclose(base[:, 2], center[:, 2] + env.robot.home_qpos[2])
    assert center[:, 2].abs().max() > 0.1  # some envs stand on pyramids or in pits
    env.sim.forward()
    env.after_physics()
    # The home pose puts the feet on the ground; the reset's joint offsets (+-0.1 rad) move them
    # by up to 2 cm. Measured from z = 0 they would be off by the platforms' heights.
    assert torch.all(env.state.height.abs() < 0.025), env.state.height
    height = mdp.base_height(env).squeeze(1)
    assert torch.allclose(height, env.robot.home_qpos[2].expand(env.num_envs), atol=1e-4)


def test_the_height_scan_matches_mujoco_rays_under_any_heading(rough_env):
    env = rough_env
    env.reset()
    rng = np.random.default_rng(1)
    low, high = env.terrain.inner_bounds(1.2)
    xy = rng.uniform(low.numpy(), high.numpy(), (env.num_envs, 2))
    yaw, tilt = rng.uniform(-math.pi, math.pi, env.num_envs), rng.uniform(-0.3, 0.3, env.num_envs)
    # A heading and a roll: the scan turns with the heading only.
    quats = [np.array([math.cos(a / 2), 0, 0, math.sin(a / 2)]) for a in yaw]
    rolls = [np.array([math.cos(r / 2), math.sin(r / 2), 0, 0]) for r in tilt]
    for i in range(env.num_envs):
        q = np.zeros(4)
        mujoco.mju_mulQuat(q, quats[i], rolls[i])
        env.sim.qpos[i, :3] = torch.tensor([*xy[i], 0.4])
        env.sim.qpos[i, 3:7] = torch.tensor(q)
    scan = mdp.HeightScan(env.cfg.height_scan.size, env.cfg.height_scan.resolution)(env).numpy()
    offsets = mdp.scan_offsets(env.cfg.height_scan.size, env.cfg.height_scan.resolution, env.device).numpy()
    assert scan.shape == (env.num_envs, 187)
    for i in range(env.num_envs):
        c, s = math.cos(yaw[i]), math.sin(yaw[i])
        points = xy[i] + offsets @ np.array([[c, s], [-s, c]])
        expected = np.clip(0.4 - ray_heights(env.sim.mj_model, points), -1, 1)
        np.testing.assert_allclose(scan[i], expected, atol=1e-3)


def test_only_the_height_scan_columns_have_a_std_floor(rough_env):
    env = rough_env
    for group in ("actor", "critic"):
        floors = env.obs_std_floors[group]
        scan = env.obs_term_slices(group)["height_scan"]
        assert floors.shape == (env.obs_dims[group],)
        assert torch.all(floors[scan] == env.cfg.height_scan.std_floor) and env.cfg.height_scan.std_floor > 0
        assert torch.all(floors[: scan.start] == 0) and torch.all(floors[scan.stop :] == 0)


def test_the_curriculum_judges_an_episode_before_its_reset(rough_env):
    """Env 0 ends its episode 2.5 m from its patch's centre (promoted), env 1 at the centre with
    commands that asked for 10 m (demoted): the episode-end hook must see where they were, not
    the reset."""
    env = rough_env
    env.reset()
    env.terrain.level = torch.tensor([1, 1, 1, 1, 1])
    env.commands[COMMAND][:] = torch.tensor([1.0, 0.0, 0.0, 0.0])
    env.state.commanded_path[1] = torch.tensor([6.0, -8.0])
    center = env.terrain.patch_center()
    env.sim.qpos[0, :2] = center[0, :2] + torch.tensor([2.5, 0.0])
    env.sim.qpos[1, :2] = center[1, :2]
    env.episode_length[:] = env.max_episode_length - 1  # every episode times out at the next step
    _, _, terminated, truncated, _ = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert truncated[:2].all() and not terminated[:2].any()
    assert env.terrain.level[:2].tolist() == [2, 0]
    assert env.terrain.last_distance[0] == pytest.approx(2.5, abs=0.05)


def test_the_commanded_path_is_the_command_turned_by_the_heading_and_starts_anew_at_a_reset(rough_env):
    """The curriculum's yardstick: with the base turned to face +y, a command of 1 m/s forward
    and 0.5 m/s to the left asks for a path towards (-0.5, 1) per second."""
    env = rough_env
    env.reset()
    yaw = math.pi / 2
    env.sim.qpos[:, 3:7] = torch.tensor([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
    env.sim.forward()
    env.commands[COMMAND][:] = torch.tensor([1.0, 0.5, 0.0, yaw])  # heading held: no turning
    steps, expected = 10, torch.zeros(env.num_envs, 2)
    for _ in range(steps):
        env.step(torch.zeros(env.num_envs, env.num_actions))
        w, z = env.sim.qpos[:, 3], env.sim.qpos[:, 6]  # the base stays about level: yaw from w and z
        heading = 2 * torch.atan2(z, w)
        forward = torch.stack([torch.cos(heading), torch.sin(heading)], dim=1)
        left = torch.stack([-forward[:, 1], forward[:, 0]], dim=1)
        expected += (1.0 * forward + 0.5 * left) * env.step_dt
    assert (env.episode_length == steps).all()  # nobody fell, so no path was restarted
    torch.testing.assert_close(env.state.commanded_path, expected, atol=2e-3, rtol=0)
    # About (-0.5, 1) per second: the start's random spin turns it by a few degrees at most.
    torch.testing.assert_close(expected, torch.tensor([-0.5, 1.0]).expand_as(expected) * steps * env.step_dt,
                               atol=0.03, rtol=0)  # fmt: skip
    env.reset()
    assert not env.state.commanded_path.any()


def test_leaving_the_grid_is_a_time_out(rough_env):
    env = rough_env
    env.reset()
    env.sim.qpos[2, :2] = env.terrain.origin + 0.3  # near the grid's corner
    _, _, terminated, truncated, _ = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert truncated[2] and not terminated[2]
    assert not truncated[[0, 1, 3, 4]].any()


def test_a_command_drawn_at_a_reset_holds_for_a_whole_interval(rough_env):
    """Interval timers restart at a reset: before, a command drawn at a reset was replaced when
    the old episode's leftover timer ran out, a moment later."""
    env = rough_env
    env.reset()
    # The precondition: some env's timer has under a second left. Every timer passes below one
    # second before it runs out (commands are drawn 3-8 s apart), whichever numbers the device's
    # generator draws (a fixed 2.8 s met it on the CPU's stream but not on a GPU's).
    for _ in range(int(8.0 / env.step_dt)):
        env.step(torch.zeros(env.num_envs, env.num_actions))
        if env.intervals.timers[0].min() < 1.0:
            break
    assert env.intervals.timers[0].min() < 1.0
    env.reset()
    drawn = env.commands[COMMAND].clone()
    for _ in range(int(3.0 / env.step_dt) - 1):
        env.step(torch.zeros(env.num_envs, env.num_actions))
        still = ~env.episode_length.eq(0)  # envs that fell were reset and drew anew
        held = env.commands[COMMAND][:, [0, 1, 3]] == drawn[:, [0, 1, 3]]
        assert held[still].all()


# ------------------------------------------------------------------------------ CLI


def test_the_rough_task_trains_logs_its_curriculum_and_plays_on_one_row(log_root, tmp_path):
    small = ["--env.terrain.rows", "3", "--env.terrain.columns-per-type", "1", "--env.terrain.patch-size", "4",
             "--env.terrain.platform", "1", "--env.terrain.border", "1"]  # fmt: skip
    result = run_main("train", ROUGH.name, *TINY_RUN, "--env.num-envs", "10", "--runner.max-iterations", "2",
                     "--runner.eval-interval", "0", *small, "--log-root", str(log_root))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(last_json(result.stdout)["run_dir"])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert len(rows) == 2
    types = ("rough", "slope_up", "slope_down", "stairs_up", "stairs_down")
    assert all(0 <= rows[-1][f"terrain/mean_level/{t}"] <= 2 for t in types)
    assert "terrain/promoted_off_top" in rows[-1] and "termination/out_of_bounds" in rows[-1]
    play = run_main("play", ROUGH.name, "--run-dir", str(run_dir), "--device", "cpu", "--episodes", "2", *small,
                   "--env.terrain.spawn-row", "2", "--env.terrain.spawn-type", "stairs_down",
                   "--env.episode-length-s", "1")  # fmt: skip
    assert play.returncode == 0, play.stderr[-3000:]
    figures = last_json(play.stdout)
    assert figures["episodes"] == 2 and 0 <= figures["mean_success"] <= 1
    assert 0 <= figures["mean_travel_distance"] < 2  # one second from the centre of a 4 m patch


def test_a_resume_puts_every_env_back_on_its_saved_row(rough_env):
    """Checkpoints keep the curriculum: a resumed run starts each env's episode on the row it had
    reached (a run of another number of envs keeps its fresh rows)."""
    env = rough_env
    env.terrain.level = torch.tensor([2, 2, 1, 0, 2])
    saved = env.resume_state()
    env.terrain.level = torch.zeros(env.num_envs, dtype=torch.long)
    env.load_resume_state(saved)
    assert env.terrain.level.tolist() == [2, 2, 1, 0, 2]
    center = env.terrain.patch_center()
    assert torch.all((env.sim.qpos[:, :2] - center[:, :2]).abs() <= SMALL.spawn_jitter + 1e-5)
    env.load_resume_state({"terrain_level": torch.zeros(3, dtype=torch.long)})
    assert env.terrain.level.tolist() == [2, 2, 1, 0, 2]


def small_rough_env(random_initial_episode_length: bool) -> VecEnv:
    cfg = dataclasses.replace(ROUGH.env_cfg, num_envs=5, terrain=SMALL, obs_noise=False,
                              random_initial_episode_length=random_initial_episode_length)  # fmt: skip
    return VecEnv(cfg, ROUGH.build(cfg), torch.device("cpu"), seed=0)


def test_a_resumed_episode_measures_its_first_foot_speed_from_its_new_pose():
    """A resumed run restarts every env at a random point of its episode, on its saved row: the
    first step's foot speed is measured from the new pose, not from where the feet stood before
    (over a whole patch in one step, it cost a resumed run's first rollout a feet_slip penalty
    of -366 per step and its critic a value loss of 1e7)."""
    env = small_rough_env(random_initial_episode_length=True)
    zero = torch.zeros(env.num_envs, env.num_actions)
    env.step(zero)
    saved = env.resume_state()
    saved["terrain_level"] = (env.terrain.level + 1) % env.terrain.rows  # every env on another patch
    env.load_resume_state(saved)
    env.step(zero)
    assert env.state.speed.max() < 1.0, env.state.speed


def test_a_reset_mid_run_measures_no_foot_speed_across_the_jump():
    """An env reset at the end of a step is on its new patch at the next one, its feet's last
    positions on the old: that update's foot speed is 0, the next is measured again."""
    env = small_rough_env(random_initial_episode_length=False)
    zero = torch.zeros(env.num_envs, env.num_actions)
    env.step(zero)
    env.terrain.level[0] = (env.terrain.level[0] + 1) % env.terrain.rows  # env 0 moves on at its reset
    env.episode_length[0] = env.max_episode_length - 1  # a time-out at the next step
    env.step(zero)
    env.step(zero)
    assert env.state.speed[0].abs().max() == 0.0
    env.step(zero)
    assert 0.0 < env.state.speed[0].max() < 1.0


def test_a_two_rank_resume_gives_each_rank_its_own_rows_and_episode_window(log_root):
    """Rank 0 writes the checkpoint with every rank's env state, and a resume sends each rank
    its own. Before, a rank other than 0 went back to the first rows of the curriculum."""
    small = ["--env.terrain.rows", "3", "--env.terrain.columns-per-type", "1", "--env.terrain.patch-size", "4",
             "--env.terrain.platform", "1", "--env.terrain.border", "1"]  # fmt: skip
    result = run_main("train", ROUGH.name, *TWO_RANK_RUN, "--env.num-envs", "10", "--runner.max-iterations", "3",
                      "--runner.eval-interval", "0", "--env.episode-length-s", "0.5", *small,
                      "--log-root", str(log_root), "--nproc-per-node", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = last_json(result.stdout)
    run_dir, checkpoint = Path(summary["run_dir"]), Path(summary["checkpoint"])
    saved = load_checkpoint(checkpoint)["env_ranks"]
    assert len(saved) == 2
    # The rows saved are those the ranks trained on: their mean is the last iteration's gauge.
    levels = torch.cat([rank["terrain_level"] for rank in saved]).double()
    assert levels.mean().item() == pytest.approx(read_metrics(run_dir / "metrics.jsonl")[-1]["terrain/mean_level"])
    assert not torch.equal(saved[0]["terrain_level"], saved[1]["terrain_level"])
    assert all(rank["episodes_finished"] > 0 for rank in saved)

    # Resumed with no iteration left, rank 0 checkpoints again what every rank restored.
    written = checkpoint.stat().st_mtime_ns
    again = run_main("train", ROUGH.name, *TWO_RANK_RUN[:2], "--nproc-per-node", "2", "--resume-dir", str(run_dir))
    assert again.returncode == 0, again.stderr[-3000:]
    assert checkpoint.stat().st_mtime_ns > written
    restored = load_checkpoint(checkpoint)["env_ranks"]
    for before, after in zip(saved, restored, strict=True):
        assert before.keys() == after.keys()
        assert all(torch.equal(before[name], after[name]) for name in before)
