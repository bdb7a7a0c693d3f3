"""The benchmark scripts are commands users run from the docs: each must still import.

They share the helpers of `scripts/common.py`, so a renamed helper breaks a benchmark that no
other test runs.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, last_json, run_main

from mjrl.metrics_file import read_metrics

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
# These run in another environment: the reference venv, which has rsl_rl
# (`scripts/rsl_rl_reference.py`), or mjlab's (`scripts/mjlab_go1.py`).
OTHER_ENVS = {"rsl_rl_reference", "mjlab_go1"}


def test_every_benchmark_script_imports() -> None:
    names = sorted(p.stem for p in SCRIPTS.glob("*.py") if p.stem not in OTHER_ENVS)
    assert {"common", "bench_seeds", "bench_locomotion"} <= set(names)
    # One interpreter imports them all, each on its own so one failure does not hide the next.
    code = (
        "import importlib, sys, traceback\n"
        f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
        "failed = []\n"
        f"for name in {names!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        failed.append(name + ': ' + traceback.format_exc(limit=1).strip().splitlines()[-1])\n"
        "print('\\n'.join(failed))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "", f"scripts that no longer import:\n{out.stdout}"


def test_scripts_share_helpers_through_common_only() -> None:
    # A benchmark that imports another's helper breaks when that benchmark changes for its own
    # reasons.
    scripts = {p.stem for p in SCRIPTS.glob("*.py")} - {"common"}
    allowed: set[tuple[str, str]] = set()
    imports = set()
    for path in SCRIPTS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            imports |= {(path.stem, m.split(".")[0]) for m in modules if m.split(".")[0] in scripts}
    assert imports <= allowed, f"scripts importing other scripts: {sorted(imports - allowed)}"


def test_commands_run_the_environments_own_train_and_play(tmp_path: Path) -> None:
    from mjrl.tools.commands import last_json_line, newest_run, play_command, train_command

    bin_dir = str(Path(sys.executable).parent)
    command = train_command("Mjrl-Cartpole-Balance", "--device", "cpu", "--log-root", str(tmp_path))
    assert command == [f"{bin_dir}/train", "Mjrl-Cartpole-Balance", "--device", "cpu", "--log-root", str(tmp_path)]
    assert play_command("Mjrl-Cartpole-Balance", "--episodes", "2") == [
        f"{bin_dir}/play", "Mjrl-Cartpole-Balance", "--episodes", "2"
    ]  # fmt: skip
    assert Path(command[0]).is_file()  # the venv's console script, whatever PATH says
    # play prints its result as its last JSON line, after anything else it prints.
    assert last_json_line('mjrl header\n{"mean_return": 1.0}\nwarning: done\n') == {"mean_return": 1.0}

    with pytest.raises(FileNotFoundError):
        newest_run(tmp_path, "Mjrl-Cartpole-Balance")
    for name in ("2026-01-01_00-00-00_seed-1", "2026-01-02_00-00-00_seed-2", "2026-01-01_12-00-00_seed-2"):
        (tmp_path / "Mjrl-Cartpole-Balance" / name).mkdir(parents=True)
    assert newest_run(tmp_path, "Mjrl-Cartpole-Balance").name == "2026-01-02_00-00-00_seed-2"
    assert newest_run(tmp_path, "Mjrl-Cartpole-Balance", "seed-1").name == "2026-01-01_00-00-00_seed-1"


def test_the_flags_after_a_double_dash_are_passed_on_untouched(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import argparse

    from common import parse_with_passthrough

    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+")
    monkeypatch.setattr(sys, "argv", ["bench", "--seeds", "1", "2", "--", "--seeds", "3", "--env.num-envs", "16"])
    args, passed = parse_with_passthrough(parser)
    assert args.seeds == [1, 2] and passed == ["--seeds", "3", "--env.num-envs", "16"]
    monkeypatch.setattr(sys, "argv", ["bench", "--seeds", "1"])
    assert parse_with_passthrough(parser)[1] == []


def test_bench_recurrent_refuses_student_runs_it_cannot_play_in_one_line_before_playing(
    monkeypatch, capsys, tmp_path
) -> None:
    """`--students` checks its runs first (found adversarially: each of these was a traceback,
    after the teacher had played a terrain type): one line, exit 2."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.chdir(SCRIPTS.parent)  # the default teacher, runs/rough-e
    import bench_recurrent

    monkeypatch.setattr(bench_recurrent, "on_hardest_row", lambda *args: pytest.fail(f"played {args}"))
    flat = SCRIPTS.parent / "runs" / "flat-2ranks"  # a kept run of another task
    cases = {
        ("--students", str(tmp_path / "a"), "--episodes", "0"): "--episodes must be at least 1 (got 0)",
        ("--students", str(tmp_path / "a"), str(tmp_path / "a")): "name runs whose folders differ",
        ("--students", str(tmp_path / "none")): f"--students {tmp_path / 'none'}: no such run directory",
        ("--students", str(flat)): "belongs to task 'Mjrl-Velocity-Flat-Quadruped', not",
        ("--students", str(flat), "--teacher", str(tmp_path)): f"--teacher {tmp_path}: run directory",
    }
    for argv, needle in cases.items():
        monkeypatch.setattr(sys, "argv", ["bench_recurrent.py", *argv])
        with pytest.raises(SystemExit) as exit_:
            bench_recurrent.main()
        err = capsys.readouterr().err.strip().splitlines()
        assert exit_.value.code == 2 and needle in err[-1], (argv, err)


def test_the_humanoid_reports_each_command_setting_with_the_flags_it_names() -> None:
    from mjrl.cli.train import parse_train_args
    from mjrl.tools.targets import HUMANOID, PROFILES

    settings = PROFILES[HUMANOID].settings()
    assert list(settings) == ["forward", "forward, no pushes", "full", "zero"]
    env = {name: parse_train_args([HUMANOID, *flags])[1].env for name, flags in settings.items()}
    pushed = env["full"].randomization.push_velocity
    assert pushed > 0 and env["full"].commands == parse_train_args([HUMANOID])[1].env.commands
    for name, lin_vel_x, push in (
        ("forward", (0.3, 0.8), pushed),
        ("forward, no pushes", (0.3, 0.8), 0.0),
        ("zero", (0.0, 0.0), 0.0),
    ):
        commands = env[name].commands
        assert (commands.lin_vel_x, commands.lin_vel_y, commands.yaw_rate) == (lin_vel_x, (0.0, 0.0), (0.0, 0.0)), name
        assert env[name].randomization.push_velocity == push, name


TINY_GPU_PHASES = {"LOOP_DEVICE": "cpu", "LOOP_GRAPHS": "off", "LOOP_ENVS": "16", "LOOP_ITERATIONS": "2",
                   "LOOP_PHYSICS_STEPS": "10", "LOOP_TASKS": "Mjrl-Cartpole-Balance", "COLLECTIVES_DEVICE": "cpu",
                   "COLLECTIVES_GRAPHS": "off", "COLLECTIVES_ENVS": "16", "COLLECTIVES_ITERATIONS": "2",
                   "SAC_DEVICE": "cpu", "SAC_ENVS": "16", "SAC_ITERATIONS": "3", "SAC_EVAL": "1",
                   "SAC_SAVE": "1", "SAC_KEEP": "2",
                   "SAC_RUNS": "Mjrl-Cartpole-Balance --algorithm.batch-size 64 --env.episode-length-s 1 "
                               "--runner.eval-envs 2",
                   "RECURRENT_DEVICE": "cpu",
                   "RECURRENT_ARGS": "--task Mjrl-Cartpole-Balance --preset smoke --iterations 5 --rnn-type gru "
                                     "--rnn-hidden-size 8 -- --env.num-envs 16 --runner.num-steps-per-env 16 "
                                     "--algorithm.num-mini-batches 2"}  # fmt: skip


@pytest.mark.heavy
def test_bench_train_and_bench_update_report_their_named_fields(tmp_path: Path) -> None:
    """Both benchmarks' default modes, tiny, on the CPU (issue 59), `bench_train` through the
    `loop`, `collectives` and `sac` phases of `gpu_checks.sh`, which keep every JSON line, tagged with
    its phase, in raw.jsonl (a window's raw figures, kept in docs/gpu/): `bench_train` names its
    physics rates for what they are and reports the share of the replayed physics, consistent
    with them; one process forced to issue its collectives learns what it learns without;
    `bench_update` builds the task's own networks."""

    def lines(*args: str) -> list[dict]:
        out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True, timeout=300).stdout
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]

    env = {
        **os.environ,
        **TINY_GPU_PHASES,
        "OUT": str(tmp_path),
        "PYTHON": sys.executable,
        "SAC_ROOT": str(tmp_path / "sac_runs"),
    }
    subprocess.run(["bash", str(SCRIPTS / "gpu_checks.sh"), "loop", "collectives", "sac", "recurrent"], env=env,
                   cwd=SCRIPTS.parent, capture_output=True, check=True, timeout=400)  # fmt: skip
    raw = [json.loads(line) for line in (tmp_path / "raw.jsonl").read_text().splitlines()]
    assert [line["phase"] for line in raw] == ["loop", *["collectives"] * 3, *["sac1"] * 3, *["recurrent"] * 3]
    train, eager, forced, verdict, *sac = raw[:-3]
    # bench_recurrent: a Balance run with MLPs, one with a GRU, each its median iteration after
    # the third, and their ratio.
    mlp, memory, ratio = raw[-3:]
    assert [mlp["policy"], memory["policy"]] == ["mlp", "memory"] and mlp["iterations"] == memory["iterations"] == 2
    assert "--policy.rnn-type gru" in memory["flags"] and "rnn" not in mlp["flags"]
    assert 0 < mlp["collection_s"] <= mlp["iteration_s"] and 0 < memory["learning_s"] <= memory["iteration_s"]
    assert ratio["memory_over_mlp"] == round(memory["iteration_s"] / mlp["iteration_s"], 3)
    # SAC's phase: its CUDA graphs refused on the CPU before a first iteration, the run again
    # eagerly; its metrics lines, evaluated every iteration, each line of its log stamped after
    # the start's epoch; its checkpoints thinned to the first and the newest, back in one file
    # with the policy alone and their file times, in a run directory `play` reads.
    assert [line["iteration"] for line in sac] == [0, 1, 2] and all("eval/mean_return" in line for line in sac)
    with tarfile.open(tmp_path / "sac_run_1.tar") as tar:
        kept = sorted(Path(m.name).name for m in tar.getmembers() if "/checkpoints/" in m.name)
        (checkpoint,) = [m for m in tar.getmembers() if m.name.endswith("checkpoints/model_000001.pt")]
        tar.extractall(tmp_path / "back", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    assert kept == ["model_000001.pt", "model_000003.pt"]
    run_dir = (tmp_path / "back" / checkpoint.name).parent.parent
    assert {"config.yaml", "metrics.jsonl", "sac_1.log", "sac_1_graphs.log"} <= {p.name for p in run_dir.iterdir()}
    assert "--runner.cuda-graphs on: the loop runs on the CPU" in (run_dir / "sac_1_graphs.log").read_text()
    start, first, *_ = (run_dir / "sac_1.log").read_text().splitlines()
    assert float(first.split()[0]) >= 0 and checkpoint.mtime >= float(start) > 1.7e9
    saved = torch.load(run_dir / "checkpoints/model_000001.pt", weights_only=True)
    assert "optimizer" not in saved and set(saved["sac"]) == {"log_alpha", "atoms", "support_set"}
    played = run_main("play", "Mjrl-Cartpole-Balance", "--run-dir", str(run_dir), "--episodes", "1",
                      "--env.num-envs", "1", "--env.episode-length-s", "0.2")  # fmt: skip
    assert played.returncode == 0, played.stderr[-2000:]
    assert (eager["forced_collectives"], forced["forced_collectives"]) == (False, True)
    assert eager["learned_sha256"] == forced["learned_sha256"]
    assert verdict == {**verdict, "runs": 2, "learned_alike": True, "graphs_learn_as_eager": None}  # one loop ran
    assert "ratio" not in train
    assert train["physics_replayed_env_steps_per_s"] > 0 and train["physics_bare_env_steps_per_s"] > 0
    share = train["training_env_steps_per_s"] / train["physics_replayed_env_steps_per_s"]
    assert 0 < train["share_of_replayed_physics"] == pytest.approx(share, rel=0.01, abs=0.002)
    (update,) = lines(str(SCRIPTS / "bench_update.py"), "--task", "Mjrl-Cartpole-Balance", "--num-envs", "16",
                      "--steps", "4", "--repeats", "1", "--modes", "fp32")  # fmt: skip
    from mjrl.tasks import load_task

    assert update["actor_hidden_dims"] == list(load_task("Mjrl-Cartpole-Balance").agent_cfg.policy.actor_hidden_dims)
    assert update["mode"] == "fp32" and update["max_param_diff"] == 0.0 and update["host_s"] > 0
    (sac,) = lines(str(SCRIPTS / "bench_update.py"), "--algo", "sac", "--task", "Mjrl-Cartpole-Balance", "--num-envs",
                   "16", "--steps", "4", "--batch-size", "32", "--repeats", "1", "--modes", "fp32")  # fmt: skip
    assert sac["algo"] == "sac" and sac["batch_size"] == 32 and sac["updates_per_step"] == 2 and sac["host_s"] > 0


def test_bench_seeds_trains_a_cart_pole_per_algorithm_and_tables_each_seeds_whole_time(monkeypatch, tmp_path) -> None:
    """`bench_seeds.py` on a task judged by its evaluation return, with `--algo sac`: the run is
    named for its algorithm, its stop is kept with the command's seconds, and the report tables
    the seed (here short of the target: two tiny iterations) under its saved symmetry setting
    (Balance gives SAC the mirror images, `Task.algorithm_settings`)."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    from common import TINY_SAC_RUN

    tiny = [*TINY_SAC_RUN[2:], "--runner.max-iterations", "2", "--runner.eval-interval", "2"]
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "bench_seeds.py"), "--task", "Mjrl-Cartpole-Balance", "--algo", "sac",
         "--log-root", str(tmp_path), "--seeds", "1", "--poll-s", "0.2", "--", *tiny],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (stop,) = [json.loads(line) for line in (tmp_path / "stops.jsonl").read_text().splitlines()]
    assert stop["run"] == "seed-1-sac" and stop["finished"] and stop["elapsed_s"] > 0
    assert len(list((tmp_path / "Mjrl-Cartpole-Balance").glob("*_seed-1-sac"))) == 1
    report = result.stdout[result.stdout.index("**SAC, with symmetry augmentation**") :]
    assert f"| 1 | not met | {stop['elapsed_s']:.0f} |" in report and "0 of 1 seeds met the targets" in report


def test_bench_startup_times_a_first_run_and_bounds_the_memory_it_allocates() -> None:
    """Issue 61: `bench_startup.py` times a 1-iteration Balance run at 256 envs and gives its
    peak RSS; `--phases` (`mjrl.tools.memory`) splits the memory by piece, in order. The bound is
    on the process's own memory (RssAnon, 295 MiB here): its peak RSS also counts the libraries'
    pages the page cache holds, 525 MiB with the venv's libraries partly evicted and 654 MiB in a
    fresh venv, the same code and versions (docs/benchmarks.md, "Start-up and memory")."""

    def lines(*args: str) -> list[dict]:
        return json_lines(run_script("bench_startup", *args).stdout)

    (run,) = lines("--repeats", "1")
    assert 0 < run["to_header_s"][0] < run["to_first_iteration_s"][0] and run["peak_rss_mib"][0] > 300
    phases = lines("--phases")
    assert [p["phase"] for p in phases][-3:] == ["learner", "first rollout", "first update"]
    peaks = [p["peak_rss_mib"] for p in phases]
    assert peaks == sorted(peaks) and all(p["anon_mib"] + p["file_mib"] <= p["rss_mib"] + 1 for p in phases)
    assert phases[-1]["anon_mib"] < 400, phases


def run_script(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`scripts/NAME.py ARGS...` run by this interpreter; its output's tails in the failure message."""
    result = subprocess.run([sys.executable, str(SCRIPTS / f"{name}.py"), *args], capture_output=True, text=True,
                            timeout=timeout)  # fmt: skip
    assert result.returncode == 0, f"{name}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def json_lines(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_bench_tracking_tables_the_policy_and_both_baselines_for_each_motion_and_start(tmp_path: Path) -> None:
    """`bench_tracking.py` on a one-iteration tracking run (1 episode each): every motion the run
    trained on, from the clip's start and from random frames, has the policy's figures and both
    baselines', in a table row each and in the JSON line, which names the run's checkpoint. The
    reference replayed open loop follows the reference's joints closer than zero actions do (it
    would not if it read the wrong columns of the observation)."""
    train = run_main("train", "Mjrl-Tracking-Flat-Humanoid", "--device", "cpu", *TINY_RUN[2:],
                     "--runner.max-iterations", "1", "--algorithm.num-learning-epochs", "1",
                     "--log-root", str(tmp_path))  # fmt: skip
    assert train.returncode == 0, train.stderr[-3000:]
    trained = last_json(train.stdout)
    out = run_script("bench_tracking", "--run-dir", trained["run_dir"], "--episodes", "1").stdout
    (figures,) = json_lines(out)
    assert figures["checkpoint"] == trained["checkpoint"] and figures["env_steps"] == trained["env_steps"]
    motions = ("mjrl:motions/humanoid_walk.npz", "mjrl:motions/humanoid_squat_reach.npz")  # the task's own
    settings = [f"{motion}:{start}" for motion in motions for start in ("first", "uniform")]
    assert [key for key in figures if ":" in key] == settings
    for setting in settings:
        assert list(figures[setting]) == ["policy", "zero actions", "reference replay"], setting
        for summary in figures[setting].values():
            assert summary["episodes"] == 1 and 0 <= summary["early_termination_rate"] <= 1, setting
            assert summary["mean_joint_pos_error"] > 0 and summary["mean_anchor_pos_error"] >= 0, setting
    rows = [line for line in out.splitlines() if line.startswith("| ") and "| start |" not in line]
    assert len(rows) == 3 * len(settings)
    replay, zero = (sum(figures[s][name]["mean_joint_pos_error"] for s in settings) for name in
                    ("reference replay", "zero actions"))  # fmt: skip
    assert replay < zero, (replay, zero)


def test_bench_parity_prints_each_seeds_final_return_and_reads_a_seed_already_run(tmp_path: Path) -> None:
    """`bench_parity.py` with one seed of two tiny iterations (the flags after `--` reach `train`):
    the table row gives the seed's mean return over its last iterations, its mean and its worst;
    the seed's metrics are kept under LOG_ROOT/LABEL, and a second call reads them rather than
    training again."""
    tiny = [*TINY_RUN[2:], "--env.episode-length-s", "0.2"]  # short episodes: two iterations end some
    args = ["Mjrl-Cartpole-Balance", "--iterations", "2", "--seeds", "1", "--log-root", str(tmp_path)]
    args += ["--label", "tiny"]
    first = run_script("bench_parity", *args, "--", *tiny).stdout.strip()
    rows = read_metrics(tmp_path / "tiny" / "seed-1" / "metrics.jsonl")
    assert [row["iteration"] for row in rows] == [0, 1]
    final = sum(row["mean_episode_return"] for row in rows) / 2
    assert first == f"| Mjrl-Cartpole-Balance | tiny | 1 | {final:.0f} | {final:.0f} | {final:.0f} |"
    assert run_script("bench_parity", *args).stdout.strip() == first  # without the flags: read, not trained
    assert len(list((tmp_path / "tiny" / "seed-1" / "logs" / "Mjrl-Cartpole-Balance").iterdir())) == 1


def test_compare_seeded_runs_finds_two_seeded_runs_of_one_version_identical(monkeypatch) -> None:
    """`compare_seeded_runs.py worktree` on one task, one iteration: the checkout installed twice
    apart (two folders) trains alike, bit for bit, and the script says so and exits 0. The
    comparison names the first figure that differs, or the iteration counts."""
    out = run_script("compare_seeded_runs", "worktree", "--tasks", "Mjrl-Cartpole-Balance", "--iterations", "1")
    assert json_lines(out.stdout) == [{"task": "Mjrl-Cartpole-Balance", "result": "identical"}]
    assert "already exists" not in out.stderr  # each side in its own folder, not one installed over the other
    monkeypatch.syspath_prepend(str(SCRIPTS))
    from compare_seeded_runs import first_difference

    rows = [{"iteration": 0, "mean_kl": 0.1}, {"iteration": 1, "mean_kl": 0.2}]
    assert first_difference(rows, [dict(row) for row in rows]) is None
    assert first_difference(rows, rows[:1]) == "2 against 1 iterations"
    assert first_difference(rows, [rows[0], {"iteration": 1, "mean_kl": 0.3}]) == "iteration 1: mean_kl 0.2 against 0.3"


def test_bench_faults_times_a_killed_ranks_job_to_its_end() -> None:
    """`bench_faults.py --scenarios kill` (one repeat): rank 1 of a 2-rank job, found by its
    pid in the rank's log, is killed, and the launcher ends the job within seconds, not after
    the 60 s hang timeout."""
    out = run_script("bench_faults", "--scenarios", "kill", "--repeats", "1").stdout
    (line,) = json_lines(out)
    assert line["scenario"] == "kill" and len(line["seconds"]) == 1 and 0 < line["seconds"][0] < 15, line


def report_rows(out: str) -> dict[tuple[str, str], list[str]]:
    """A report's table (`| policy | commands | figures... |`): the figures by (policy, commands)."""
    rows = [line.strip("| ").split(" | ") for line in out.splitlines() if line.startswith("| ")]
    return {(policy, cmds): figures for policy, cmds, *figures in rows if policy not in ("policy", "---")}


@pytest.mark.heavy
def test_bench_locomotion_reports_each_command_setting_and_teaches_a_student_from_its_run(tmp_path) -> None:
    """Both default modes of `bench_locomotion`, tiny (issue 61): a robot's run, then the student
    `--teacher` distils from it (formerly bench_distillation.py). The locomotion report has each
    policy under each command setting of the robot's profile and judges each target on the figure
    its table gives; the student's report plays the teacher as the locomotion report did (the same
    figures), judges the student on its own targets, and its ONNX sidecar names no base velocity.
    Both play 1 s episodes, which their reports name; `--no-write` leaves docs/benchmarks.md as it is."""
    from mjrl.tools.targets import GO1, PROFILES, QUADRUPED_PROFILE, STUDENT

    doc = (SCRIPTS.parent / "docs" / "benchmarks.md").read_text()
    # No periodic evaluation: 20 s episodes, 4-6 s of each training, and a tiny run meets no target.
    tiny = ["--env.num-envs", "16", "--runner.max-iterations", "2", "--runner.eval-interval", "0"]
    quick = ["--episodes", "2", "--episode-length-s", "1", "--no-write"]
    loco = run_script("bench_locomotion", "--log-root", str(tmp_path), *quick, "--", *tiny).stdout
    (teacher,) = (tmp_path / GO1).iterdir()
    assert f"`{GO1}`, run `{teacher.name}`, 2 iterations" in loco
    assert "`play --episodes 2 --env.episode-length-s 1`, deterministic policy" in loco
    rows = report_rows(loco)
    settings = list(QUADRUPED_PROFILE.settings())
    assert settings == ["forward", "full"]
    assert list(rows) == [(policy, cmds) for policy in ("trained", "zero actions") for cmds in settings]
    assert_checks_judge_the_table(loco, QUADRUPED_PROFILE.targets, rows, "trained")
    assert all((teacher / f"locomotion_cpu_{x}.png").stat().st_size > 0 for x in ("env_steps", "wall_s"))

    distill = run_script("bench_locomotion", "--teacher", str(teacher), "--log-root", str(tmp_path), "--iterations",
                         "2", *quick, "--", *tiny).stdout  # fmt: skip
    (student,) = (tmp_path / STUDENT).iterdir()
    assert f"`{STUDENT}`, run `{student.name}`, 2 iterations" in distill and f"Teacher `{teacher}`." in distill
    assert "--episodes 2 --env.episode-length-s 1`" in distill
    figures = report_rows(distill)
    assert list(figures) == [(policy, cmds) for policy in ("teacher", "student") for cmds in settings]
    for cmds in settings:  # the planar and yaw-rate errors, each printed to 3 decimals by both
        assert figures["teacher", cmds][:2] == rows["trained", cmds][:2], cmds
    (inputs,) = [line for line in distill.splitlines() if line.startswith("Its ONNX model reads ")]
    terms = inputs.split(": ", 1)[1].split("; ")[0].split(", ")
    assert "base_lin_vel" not in terms and "base_ang_vel" in terms and inputs.endswith("; no base linear velocity.")
    assert_checks_judge_the_table(distill, PROFILES[STUDENT].targets, figures, "student")
    forward = figures["student", "forward"]
    meets = float(forward[0]) <= 0.25 and forward[2] == "0.0%"  # forward planar error, early terminations
    assert json_lines(distill)[-1] == {"targets_met": meets}
    assert (student / "distillation_cpu_env_steps.png").stat().st_size > 0
    assert (SCRIPTS.parent / "docs" / "benchmarks.md").read_text() == doc


def assert_checks_judge_the_table(out: str, targets, rows: dict, judged: str) -> None:
    """Each target's check line says met exactly when its figure is within bounds, and gives the
    figure the table gives (planar error, yaw-rate error: the table's first columns)."""
    columns = {"mean_lin_vel_error": 0, "mean_yaw_rate_error": 1}
    for cmds, figure, low, high in targets:
        (check,) = [line for line in out.splitlines() if line.startswith(f"- {cmds} commands, {figure} ")]
        value = float(check.split(": ")[1].split()[0])
        assert check.endswith("**met**" if low <= value <= high else "**not met**"), check
        if figure in columns:
            assert check.split(": ")[1].split()[0] == rows[judged, cmds][columns[figure]], check


def test_bench_distributed_reports_one_rank_against_two() -> None:
    """`bench_distributed.py` tiny (issue 61): one rank, then two, at 16 envs a rank. Two ranks
    sync the rollout only (`--syncs`, 13 s less): the other 2-rank tests train with the default
    sync, gradients. With 3 iterations one is measured after the warm-up's two, so each line's
    figures are that iteration's: its steps/s are the whole job's steps (16 envs x 32 steps a
    rank) over its seconds, and two ranks' speedup is their steps/s over one rank's."""
    out = run_script("bench_distributed", "--num-envs", "16", "--iterations", "3", "--syncs", "rollout").stdout
    one, two = json_lines(out)
    assert [(line["ranks"], line["sync"]) for line in (one, two)] == [(1, "gradients"), (2, "rollout")]
    for line in (one, two):
        steps, seconds = line["ranks"] * 16 * 32, line["collection_s"] + line["learning_s"]
        # Each of the two seconds is rounded to the millisecond, the steps/s to the step.
        assert steps / (seconds + 0.001) - 1 <= line["steps_per_second"] <= steps / (seconds - 0.001) + 1, line
    # One process issues no collectives; two spend part of each iteration in them.
    assert one["collective_share"] == 0 < two["collective_share"]
    assert two["speedup_vs_1_rank"] == round(two["steps_per_second"] / one["steps_per_second"], 2)
