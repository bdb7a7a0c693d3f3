"""`mjrl export` and `train --export`: the exported actor against `act_deterministic`, and the sidecar."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
from conftest import TINY_RUN, last_json, run_main

from mjrl.checkpoint import load_newest_checkpoint
from mjrl.cli.main import main as mjrl_main
from mjrl.errors import UsageError
from mjrl.tasks import load_task
from mjrl.tools.export import ObsTerm as ExportedTerm
from mjrl.tools.export import Sidecar
from mjrl.tools.trained import load_trained, trained_env_config

CARTPOLE, QUADRUPED = "Mjrl-Cartpole-Balance", "Mjrl-Velocity-Flat-Quadruped"
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def train_once(tmp_path_factory) -> Callable[[str], Path]:
    """The run directory of one tiny training run per task, which exports ONNX at its end."""
    runs: dict[str, Path] = {}

    def run(task_name: str) -> Path:
        if task_name not in runs:
            log_root = tmp_path_factory.mktemp("logs")
            result = run_main(
                "train", task_name, *TINY_RUN[:2], "--logger", "none", "--log-root", str(log_root),
                "--env.num-envs", "8", "--runner.num-steps-per-env", "8", "--algorithm.num-mini-batches", "2",
                "--runner.max-iterations", "1", "--runner.eval-interval", "0", "--export", "onnx",
            )  # fmt: skip
            assert result.returncode == 0, result.stderr[-2000:]
            runs[task_name] = Path(last_json(result.stdout)["run_dir"])
            assert f"exported {runs[task_name] / 'exported' / 'policy.onnx'}" in result.stdout
        return runs[task_name]

    return run


@pytest.fixture(params=[CARTPOLE, QUADRUPED])
def trained(request, train_once) -> tuple[str, Path]:
    """Both task families: (task name, run directory)."""
    return request.param, train_once(request.param)


def real_observations(task_name: str, run_dir: Path, steps: int = 10):
    """The trained policy, its env, and a batch of actor observations that the policy visited."""
    task = load_task(task_name)
    path, state = load_newest_checkpoint(run_dir)
    env_cfg = trained_env_config(task, state).for_evaluation(8)
    env, policy = load_trained(task, state, path, env_cfg, torch.device("cpu"))
    batches, obs = [], env.obs["actor"]
    with torch.no_grad():
        for _ in range(steps):
            batches.append(obs.clone())  # the env writes the next step's into the same tensor
            obs = env.step(policy.act_deterministic(obs) + 0.3 * torch.randn(env.num_envs, env.num_actions))[0]["actor"]
    return env, policy, torch.cat(batches)


def run_exported(model: Path, fmt: str, obs: torch.Tensor) -> torch.Tensor:
    if fmt == "onnx":
        session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        return torch.from_numpy(session.run(["actions"], {"obs": obs.numpy()})[0])
    if fmt == "pt2":
        return torch.export.load(str(model)).module()(obs)
    with warnings.catch_warnings():  # torch deprecates TorchScript, which libtorch runtimes still load
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.load(str(model))(obs)


@pytest.mark.parametrize("fmt", ["onnx", "pt2", "torchscript"])
def test_exported_actor_matches_act_deterministic(trained, fmt, tmp_path):
    task_name, run_dir = trained
    if fmt == "onnx":  # written by `train --export onnx`
        model = run_dir / "exported" / "policy.onnx"
    else:
        model = tmp_path / ("policy.pt2" if fmt == "pt2" else "policy.pt")
        result = run_main("mjrl", "export", task_name, "--run-dir", str(run_dir), "--format", fmt, "--out", str(model))
        assert result.returncode == 0, result.stderr[-2000:]
        assert f"wrote {model} and {model.name}.json" in result.stdout
        # torch deprecates TorchScript: said once, and torch's own warnings kept from the user
        assert result.stdout.count("torch deprecates TorchScript") == (fmt == "torchscript")
        assert "Warning" not in result.stderr
    env, policy, obs = real_observations(task_name, run_dir)
    # The normaliser is not the identity, so folding it in is tested.
    assert policy.actor_normalizer.count > 0 and policy.actor_normalizer.mean.abs().max() > 0.01
    with torch.no_grad():
        expected = policy.act_deterministic(obs)
    actual = run_exported(model, fmt, obs)
    assert actual.shape == expected.shape == (80, env.num_actions)
    assert (actual - expected).abs().max().item() <= TOLERANCE
    # Any batch size, including one observation.
    assert (run_exported(model, fmt, obs[:1]) - expected[:1]).abs().max().item() <= TOLERANCE


def test_sidecar_round_trips_and_describes_the_env(trained):
    task_name, run_dir = trained
    sidecar_path = run_dir / "exported" / "policy.onnx.json"
    text = sidecar_path.read_text()
    sidecar = Sidecar.from_json(text)
    assert sidecar.to_json() == text
    env, _, _ = real_observations(task_name, run_dir, steps=2)
    obs = env.obs["actor"]  # the current state's, for comparison with the terms below
    checkpoint, state = load_newest_checkpoint(run_dir)
    assert (sidecar.task, sidecar.checkpoint, sidecar.run_dir) == (task_name, str(checkpoint), str(run_dir))
    assert (sidecar.iteration, sidecar.env_steps) == (1, state["env_steps"])
    assert sidecar.model_file == "policy.onnx" and sidecar.format == "onnx"
    assert sidecar.control_period_s == pytest.approx(env.step_dt)
    assert sidecar.action_size == env.num_actions == len(sidecar.action_joints) == len(sidecar.action_offset)
    assert np.allclose(sidecar.action_offset, env.action_offset.numpy())
    # Slicing a real observation by the sidecar's layout gives each term's own value.
    assert sidecar.observation_size == obs.shape[1]
    terms = env.task.observations["actor"]
    assert [t.name for t in sidecar.observation_terms] == list(terms)
    for term in sidecar.observation_terms:
        assert torch.equal(obs[:, term.start : term.start + term.size], terms[term.name].func(env))
        assert term.history == terms[term.name].history == 1
    if task_name == QUADRUPED:
        legs = [f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")]
        assert sidecar.action_joints == tuple(legs)
        assert sidecar.action_scale == (0.25,) * 12 and sidecar.control_period_s == pytest.approx(0.02)
    else:
        assert sidecar.action_joints == ("slider",)


def test_scaled_actions_are_the_actuator_targets(train_once, tmp_path):
    # The quadruped's transform has all three parts: offset (home pose), scale and clip.
    task_name, run_dir = QUADRUPED, train_once(QUADRUPED)
    model = tmp_path / "targets.onnx"
    result = run_main(
        "mjrl", "export", task_name, "--run-dir", str(run_dir), "--out", str(model), "--scaled-actions", "True"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    env, policy, obs = real_observations(task_name, run_dir, steps=3)
    with torch.no_grad():
        mean = policy.act_deterministic(obs)
    clip, scale = env.cfg.action_clip, env.action_scale
    targets = env.action_offset + scale * mean.clamp(-clip, clip)
    assert (run_exported(model, "onnx", obs) - targets).abs().max().item() <= TOLERANCE
    assert Sidecar.from_json((tmp_path / "targets.onnx.json").read_text()).actions_scaled


def test_export_errors_are_one_line(train_once, tmp_path, capsys):
    run_dir = str(train_once(CARTPOLE))
    cases = [
        ([CARTPOLE], "give exactly one of --checkpoint PATH or --run-dir DIR"),
        ([QUADRUPED, "--run-dir", run_dir], f"belongs to task '{CARTPOLE}'"),
        ([CARTPOLE, "--run-dir", run_dir, "--format", "tflite"], "--format"),
        ([CARTPOLE, "--run-dir", run_dir, "--out", str(tmp_path)], "a folder stands where the file must be"),
    ]
    for args, needle in cases:
        assert mjrl_main(["export", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("mjrl export: error: ") and err.count("\n") == 1 and needle in err, err


def test_older_sidecars_read_as_version_6():
    sidecar = Sidecar(
        format="onnx", model_file="policy.onnx", input_name="obs", output_name="actions", observation_size=3,
        observation_terms=(ExportedTerm("joint_pos", 0, 3),), action_size=3, action_joints=("a", "b", "c"),
        action_scale=(0.5, 0.5, 0.5), action_clip=1.0, action_offset=(0.0, 0.1, 0.2), actions_scaled=False,
        target_feedforward=None, reference_inputs=None, action_squash=None, recurrent_state=None,
        control_period_s=0.02,
        physics_timestep_s=0.005,
        decimation=4, task="T", run_dir="r", checkpoint="c", iteration=1, env_steps=2,
    )  # fmt: skip
    version_5 = {k: v for k, v in json.loads(sidecar.to_json()).items() if k != "recurrent_state"}
    version_5["schema"] = "mjrl-policy/5"
    assert Sidecar.from_json(json.dumps(version_5)) == sidecar
    version_4 = {k: v for k, v in version_5.items() if k != "action_squash"} | {"schema": "mjrl-policy/4"}
    assert Sidecar.from_json(json.dumps(version_4)) == sidecar
    version_3 = {k: v for k, v in version_4.items() if k != "reference_inputs"} | {"schema": "mjrl-policy/3"}
    assert Sidecar.from_json(json.dumps(version_3)) == sidecar
    version_2 = {k: v for k, v in version_3.items() if k != "target_feedforward"} | {"schema": "mjrl-policy/2"}
    assert Sidecar.from_json(json.dumps(version_2)) == sidecar
    old = version_2 | {"schema": "mjrl-policy/1", "action_scale": 0.5}
    assert Sidecar.from_json(json.dumps(old)) == sidecar
    with pytest.raises(UsageError, match="not an mjrl-policy/6 sidecar"):
        Sidecar.from_json(json.dumps(old | {"schema": "other/1"}))
    with pytest.raises(UsageError, match="malformed mjrl-policy/6 sidecar"):
        Sidecar.from_json(json.dumps({k: v for k, v in old.items() if k != "action_offset"}))


def test_a_pt2_policy_runs_in_a_process_without_mjrl_as_the_eager_policy(train_once, tmp_path):
    """`policy.pt2` (`train --export pt2`'s format) is loaded by `torch.export.load` in a process
    that never imports mjrl, and gives the eager policy's actions within 1e-6 over 1,000
    observations the policy visited."""
    run_dir = train_once(QUADRUPED)
    model = tmp_path / "policy.pt2"
    result = run_main("mjrl", "export", QUADRUPED, "--run-dir", str(run_dir), "--format", "pt2", "--out", str(model))
    assert result.returncode == 0, result.stderr[-2000:]
    _, policy, obs = real_observations(QUADRUPED, run_dir, steps=125)  # 8 envs x 125 steps
    assert obs.shape[0] == 1000
    with torch.no_grad():
        expected = policy.act_deterministic(obs)
    torch.save(obs, tmp_path / "obs.pt")
    code = (
        "import sys, torch\n"
        f"actions = torch.export.load({str(model)!r}).module()(torch.load({str(tmp_path / 'obs.pt')!r}))\n"
        f"torch.save(actions, {str(tmp_path / 'actions.pt')!r})\n"
        "assert not [m for m in sys.modules if m.split('.')[0] == 'mjrl'], 'mjrl was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (torch.load(tmp_path / "actions.pt") - expected).abs().max().item() <= 1e-6


def test_play_runs_a_pt2_export_as_it_plays_the_checkpoint_and_refuses_what_it_cannot_run(train_once, tmp_path):
    """`play --exported policy.pt2` evaluates the deployed model in the env of the checkpoint it
    came from: the same episodes as `play` of that checkpoint (the model's actions differ from the
    eager policy's in the last bits only). What it cannot run is one line, exit 2."""
    run_dir = train_once(CARTPOLE)
    model = tmp_path / "policy.pt2"
    assert (
        run_main(
            "mjrl", "export", CARTPOLE, "--run-dir", str(run_dir), "--format", "pt2", "--out", str(model)
        ).returncode
        == 0
    )
    common = ("--episodes", "2", "--device", "cpu", "--env.episode-length-s", "2")
    played = [
        run_main("play", CARTPOLE, *source, *common)
        for source in (("--exported", str(model)), ("--run-dir", str(run_dir)))
    ]
    assert [p.returncode for p in played] == [0, 0], played[0].stderr[-2000:]
    exported, checkpoint = (last_json(p.stdout) for p in played)
    assert exported["exported"] == str(model) and exported["iteration"] == checkpoint["iteration"]
    assert exported["mean_return"] == pytest.approx(checkpoint["mean_return"], rel=1e-4)

    onnx = run_dir / "exported" / "policy.onnx"
    no_sidecar = tmp_path / "lone.pt2"
    no_sidecar.write_bytes(model.read_bytes())
    scaled = tmp_path / "scaled.pt2"
    assert run_main("mjrl", "export", CARTPOLE, "--run-dir", str(run_dir), "--format", "pt2", "--out", str(scaled),
                    "--scaled-actions", "True").returncode == 0  # fmt: skip
    damaged = tmp_path / "damaged.pt2"
    damaged.write_bytes(b"not a zip")
    (tmp_path / "damaged.pt2.json").write_text((tmp_path / "policy.pt2.json").read_text())
    cases = {
        (CARTPOLE, "--exported", str(onnx)): "play runs pt2 exports",
        (CARTPOLE, "--exported", str(no_sidecar)): "its sidecar lone.pt2.json is missing",
        (CARTPOLE, "--exported", str(scaled)): "it outputs actuator targets",
        (CARTPOLE, "--exported", str(damaged)): "not a readable pt2 model",
        (CARTPOLE, "--exported", str(tmp_path / "absent.pt2")): "no such file",
        ("Mjrl-Cartpole-Swingup", "--exported", str(model)): "exported from Mjrl-Cartpole-Balance",
        (CARTPOLE, "--exported", str(model), "--run-dir", str(run_dir)): "drop --checkpoint and --run-dir",
        (CARTPOLE, "--exported", str(model), "--video", str(tmp_path / "v.mp4")): "--video records a checkpoint",
    }
    for args, message in cases.items():
        result = run_main("play", *args, "--episodes", "1")
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr[-500:])
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "v.mp4").exists()


EXPORT_DOCS = Path(__file__).parent.parent / "docs" / "export.md"
RUNTIME_LOOP = re.search(r"<!-- runtime loop -->\n```python\n(.*?)```", EXPORT_DOCS.read_text(), re.S).group(1)
AOTI_RUNTIME = re.search(r"<!-- aoti runtime -->\n```cpp\n(.*?)```", EXPORT_DOCS.read_text(), re.S).group(1)
AOTI_BUILD = re.search(r"<!-- not run: tests/test_export.py builds[^>]*-->\n```bash\n(.*?)```", EXPORT_DOCS.read_text(),
                       re.S).group(1)  # fmt: skip


def test_an_aoti_package_runs_from_the_docs_cpp_program_and_in_play(train_once, tmp_path):
    """`--format aoti`: the package, run by docs/export.md's C++ program (built by its command,
    against torch's own libtorch) and as `play --exported` runs it, gives the policy's actions."""
    from mjrl.tools.export import ExportedPolicy

    run_dir, model = train_once(CARTPOLE), tmp_path / "policy.aoti.pt2"
    result = run_main("mjrl", "export", CARTPOLE, "--run-dir", str(run_dir), "--format", "aoti", "--out", str(model))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(Path(f"{model}.json").read_text())["format"] == "aoti"
    _, policy, obs = real_observations(CARTPOLE, run_dir)
    with torch.no_grad():
        expected = policy.act_deterministic(obs)
    assert (ExportedPolicy(model, torch.device("cpu")).act_deterministic(obs) - expected).abs().max() <= TOLERANCE

    (tmp_path / "run_policy.cpp").write_text(AOTI_RUNTIME)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # its python
    build = subprocess.run(["bash", "-e", "-c", AOTI_BUILD], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    lines = "\n".join(" ".join(f"{x:.9g}" for x in row) for row in obs.tolist())
    ran = subprocess.run([tmp_path / "run_policy", model], input=lines, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    actions = torch.tensor([[float(x) for x in line.split()] for line in ran.stdout.splitlines()])
    assert actions.shape == expected.shape and (actions - expected).abs().max() <= TOLERANCE
    ragged = subprocess.run(
        [tmp_path / "run_policy", model], input="0 1 0 0 0\n\n0 1 0\n", capture_output=True, text=True
    )
    assert ragged.returncode == 2 and ragged.stderr == "line 2 has 3 numbers, the first 5\n" and not ragged.stdout


@pytest.mark.parametrize("rnn_type", ["lstm", "gru"])
def test_the_docs_runtime_loop_carries_a_recurrent_state_as_play_does(rnn_type, tmp_path):
    """docs/export.md's ONNX Runtime loop, which carries the state and zeroes it where an
    episode begins, against the policy as play runs it (its normaliser from the warm-up), over
    1,000 steps of 8 robots whose 1 s episodes end 50 times each; pt2 as `play --exported` runs
    it, the same, and the LSTM's AOTInductor package (its state two inputs and two outputs)."""
    from mjrl.distributed.context import single_process
    from mjrl.runner.config import TrainConfig
    from mjrl.runner.start import build_run
    from mjrl.tools.export import ExportedPolicy, export_policy

    task = load_task("Mjrl-Cartpole-Balance-Positions")
    cfg = TrainConfig.for_task(task, "ppo")
    policy_cfg = dataclasses.replace(cfg.policy, rnn_type=rnn_type, rnn_hidden_size=16, rnn_num_layers=2)
    env_cfg = dataclasses.replace(cfg.env, num_envs=8, episode_length_s=1.0, obs_noise=False)
    runner = build_run(task, dataclasses.replace(cfg, env=env_cfg, policy=policy_cfg, device="cpu", logger="none",
                                                 log_root=str(tmp_path)), single_process("cpu"))  # fmt: skip
    env, policy = runner.env, runner.algorithm.inference_policy()
    assert policy.actor_normalizer.count > 1  # the warm-up's statistics, folded into the exports
    source = {"task": task.name, "run_dir": tmp_path, "checkpoint": "-", "iteration": 0, "env_steps": 0}
    onnx, sidecar = export_policy(env, policy, "onnx", tmp_path / "policy.onnx", source)
    exported = {
        fmt: ExportedPolicy(export_policy(env, policy, fmt, tmp_path / name, source)[0], torch.device("cpu"))
        for fmt, name in (("pt2", "policy.pt2"), ("aoti", "policy.aoti.pt2"))[: 2 if rnn_type == "lstm" else 1]
    }
    memory = json.loads(sidecar.read_text())["recurrent_state"]
    parts = ["h", "c"] if rnn_type == "lstm" else ["h"]
    assert memory["inputs"] == [f"{p}_in" for p in parts] and memory["shape"] == [2, "robots", 16]

    namespace: dict = {}
    exec(RUNTIME_LOOP, namespace)
    runtime = namespace["RecurrentRuntime"](str(onnx), 8)
    obs, begins, ends, worst = (
        env.reset()["actor"],
        np.ones(8, dtype=bool),
        0,
        {"onnx": 0.0, **dict.fromkeys(exported, 0.0)},
    )
    policy.reset(torch.ones(8, dtype=torch.bool))
    with torch.no_grad():
        for _ in range(1000):
            expected = policy.act_deterministic(obs)
            got = runtime.act(obs.numpy(), begins)
            worst["onnx"] = max(worst["onnx"], float(np.abs(got - expected.numpy()).max()))
            for fmt, runtime_side in exported.items():
                worst[fmt] = max(worst[fmt], float((runtime_side.act_deterministic(obs) - expected).abs().max()))
            next_obs, _, terminated, truncated, _ = env.step(expected)
            dones = terminated | truncated
            for runner_side in (policy, *exported.values()):
                runner_side.reset(dones)
            obs, begins, ends = next_obs["actor"], dones.numpy().copy(), ends + int(dones.sum())
    assert ends == 8 * 50 and max(worst.values()) < TOLERANCE, worst
