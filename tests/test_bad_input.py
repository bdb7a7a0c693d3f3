"""Bad input on the newer surfaces (play and its videos, export, plot, config files, resume
directories, robot configs and MJCF files, terrain and height scan, gait and locked joints,
distillation, symmetry, the launcher's counts), found adversarially: each answer is one line saying
what is wrong, exit code 2, no traceback, and nothing written."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, last_json, run_main

BALANCE, SWINGUP, GO1 = "Mjrl-Cartpole-Balance", "Mjrl-Cartpole-Swingup", "Mjrl-Velocity-Flat-Quadruped"
ROUGH, HUMANOID = "Mjrl-Velocity-Rough-Quadruped", "Mjrl-Velocity-Flat-Humanoid"
STUDENT = "Mjrl-Velocity-Flat-Quadruped-Student"
DISTIL = ("--algo", "distillation", "--algorithm.teacher")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Runs of two tasks and a set of broken files."""
    root = tmp_path_factory.mktemp("bad_input")
    runs = {}
    for task in (BALANCE, SWINGUP):
        result = run_main("train", task, *TINY_RUN, "--runner.max-iterations", "1", "--log-root", str(root / "runs"))
        assert result.returncode == 0, result.stderr[-2000:]
        runs[task] = Path(last_json(result.stdout)["run_dir"])
    (root / "garbage.pt").write_bytes(b"\x80\x02not a checkpoint")
    (root / "empty.pt").write_bytes(b"")
    (root / "no_checkpoints" / "checkpoints").mkdir(parents=True)
    (root / "no_metrics").mkdir()
    (root / "empty_metrics").mkdir()
    (root / "empty_metrics" / "metrics.jsonl").write_text("")
    (root / "broken.yaml").write_text("env: [1, 2\n")
    (root / "binary.yaml").write_bytes(bytes(range(128, 256)))
    (root / "not_mjcf.xml").write_text("<html><body>no robot here</body></html>\n")
    # A run kept to play: its checkpoint without the optimizer's state (runs/blind-*, a GPU window's).
    shutil.copytree(runs[BALANCE], root / "thinned_run")
    (checkpoint,) = (root / "thinned_run" / "checkpoints").glob("model_*.pt")
    torch.save({k: v for k, v in torch.load(checkpoint, weights_only=True).items() if k != "optimizer"}, checkpoint)
    # Runs whose saved config a resume starts from, damaged and from a version with other keys.
    for name, text in (("broken_config_run", "env: [1, 2\n"), ("stale_config_run", "env:\n  gravity: 3\n")):
        shutil.copytree(runs[BALANCE], root / name)
        (root / name / "config.yaml").write_text(text)
    return {"root": root, "balance": runs[BALANCE], "swingup": runs[SWINGUP]}


CASES = {
    # play: checkpoints, runs and counts
    "play-garbage-checkpoint": (["play", BALANCE, "--checkpoint", "{root}/garbage.pt"], "is unreadable"),
    "play-empty-checkpoint": (["play", BALANCE, "--checkpoint", "{root}/empty.pt"],
                              "is unreadable (EOFError): damaged, or not a checkpoint; give another model_*.pt"),
    "play-directory-as-checkpoint": (["play", BALANCE, "--checkpoint", "{balance}"], "is a directory"),
    "play-run-without-checkpoints": (["play", BALANCE, "--run-dir", "{root}/no_checkpoints"], "has no checkpoints"),
    "play-file-as-run": (["play", BALANCE, "--run-dir", "{root}/garbage.pt"], "no such run directory"),
    "play-other-tasks-run": (["play", BALANCE, "--run-dir", "{swingup}"], f"belongs to task '{SWINGUP}'"),
    "play-both-sources": (["play", BALANCE, "--run-dir", "{balance}", "--checkpoint", "{root}/garbage.pt"],
                          "exactly one of"),
    "play-no-episodes": (["play", BALANCE, "--run-dir", "{balance}", "--episodes", "0"], "--episodes"),
    "play-no-envs": (["play", BALANCE, "--run-dir", "{balance}", "--env.num-envs", "0"], "--env.num-envs"),
    "resume-a-thinned-checkpoint": (["train", BALANCE, "--resume-dir", "{root}/thinned_run"],
                                    "holds no optimizer state (kept to play or thinned)"),
    "resume-without-value": (["train", BALANCE, "--runner.max-iterations", "1", "--resume"], "--resume"),
    # play --video: paths, formats and lengths
    "video-format": (["play", BALANCE, "--run-dir", "{balance}", "--video", "{out}/clip.avi"], "must end in .mp4"),
    "video-endless": (["play", BALANCE, "--run-dir", "{balance}", "--video", "{out}/clip.mp4",
                       "--video-seconds", "1e9"], "--video-seconds"),
    "video-fps": (["play", BALANCE, "--run-dir", "{balance}", "--video", "{out}/clip.mp4", "--video-fps", "1e6"],
                  "--video-fps"),
    "video-of-zero-actions": (["play", BALANCE, "--zero-actions", "True", "--video", "{out}/clip.mp4"],
                              "drop --zero-actions"),
    # mjrl export
    "export-format": (["mjrl", "export", BALANCE, "--run-dir", "{balance}", "--format", "tflite"], "--format"),
    "export-suffix": (["mjrl", "export", BALANCE, "--run-dir", "{balance}", "--out", "{out}/policy.txt"],
                      "must end in .onnx"),
    "export-format-and-suffix": (["mjrl", "export", BALANCE, "--run-dir", "{balance}", "--format", "torchscript",
                                  "--out", "{out}/policy.onnx"], "must end in .pt or .ts"),
    "export-garbage": (["mjrl", "export", BALANCE, "--checkpoint", "{root}/garbage.pt"], "is unreadable"),
    "export-other-task": (["mjrl", "export", BALANCE, "--run-dir", "{swingup}"], "belongs to task"),
    # mjrl plot
    "plot-no-run": (["mjrl", "plot", "{root}/nowhere", "--out", "{out}/c.png"], "no such run directory"),
    "plot-no-metrics": (["mjrl", "plot", "{root}/no_metrics", "--out", "{out}/c.png"], "has no metrics.jsonl"),
    "plot-empty-metrics": (["mjrl", "plot", "{root}/empty_metrics", "--out", "{out}/c.png"], "no iterations yet"),
    "plot-image-type": (["mjrl", "plot", "{balance}", "--out", "{out}/c.bmpx"], "unknown image type"),
    # train: config files and resume directories
    "config-broken-yaml": (["train", BALANCE, "--config", "{root}/broken.yaml"], "is not valid YAML"),
    "config-missing": (["train", BALANCE, "--config", "{root}/none.yaml"], "does not exist"),
    "config-binary": (["train", BALANCE, "--config", "{root}/binary.yaml"], "is not a text file"),
    "config-directory": (["train", BALANCE, "--config", "{root}"], "is a directory"),
    "config-of-other-task": (["train", BALANCE, "--config", "{swingup}/config.yaml"], f"is a config of {SWINGUP}"),
    "resume-without-checkpoints": (["train", BALANCE, "--resume-dir", "{root}/no_checkpoints"], "has no checkpoints"),
    "resume-other-task": (["train", BALANCE, "--resume-dir", "{swingup}"], f"belongs to task '{SWINGUP}'"),
    "resume-file": (["train", BALANCE, "--resume-dir", "{root}/garbage.pt"], "no such run directory"),
    "resume-broken-config": (["train", BALANCE, "--resume-dir", "{root}/broken_config_run"],
                             "the resumed run's config"),
    "resume-stale-config": (["train", BALANCE, "--resume-dir", "{root}/stale_config_run"], "gravity"),
    "rdzv-id-none": (["train", BALANCE, "--nproc-per-node", "1", "--rdzv-id", "none"], "--rdzv-id none is torchrun's"),
    # robot configs and MJCF files
    "mjcf-missing": (["train", GO1, "--env.robot.mjcf", "{root}/none.xml"], "no MJCF file"),
    "mjcf-directory": (["train", GO1, "--env.robot.mjcf", "{root}"], "no MJCF file"),
    "mjcf-not-mjcf": (["train", GO1, "--env.robot.mjcf", "{root}/not_mjcf.xml"], "cannot load the MJCF"),
    "robot-base-body": (["train", GO1, "--env.robot.base-body", "nope"], "base_body names no body 'nope'"),
    "robot-joint": (["train", GO1, "--env.robot.joints", "FR_hip_joint", "knee"], "names no joint 'knee'"),
    "robot-keyframe": (["train", GO1, "--env.robot.home-keyframe", "sit"], "names no keyframe 'sit'"),
    # terrain and height scan
    "terrain-type": (["train", ROUGH, "--env.terrain.types", "rough", "lava"], "--env.terrain.types must name"),
    "terrain-spawn-type": (["train", ROUGH, "--env.terrain.types", "rough", "--env.terrain.spawn-type", "stairs_up"],
                           "is not one of --env.terrain.types: rough"),
    "terrain-platform": (["train", ROUGH, "--env.terrain.platform", "9"], "must fit in --env.terrain.patch-size"),
    "terrain-resolution": (["train", ROUGH, "--env.terrain.resolution", "9"], "at least 4 height samples"),
    "terrain-spawn-row-on-flat": (["train", GO1, "--env.terrain.spawn-row", "3"], "this terrain is flat"),
    "terrain-spawn-type-on-flat": (["train", GO1, "--env.terrain.spawn-type", "stairs_up"], "this terrain is flat"),
    "scan-off-grid": (["train", ROUGH, "--env.height-scan.resolution", "0.3"], "whole multiples"),
    # the humanoid's gait and locked joints
    "gait-offsets": (["train", HUMANOID, "--env.gait.foot-phase-offsets", "0", "0.5", "0.25"], "give one per foot"),
    "gait-period": (["train", HUMANOID, "--env.gait.period-s", "0"], "--env.gait.period-s"),
    "gait-stance": (["train", HUMANOID, "--env.gait.stance-fraction", "1"], "--env.gait.stance-fraction"),
    "gait-paid-joints": (["train", HUMANOID, "--env.gait.paid-joints", "tail*"], "match none of the swing joints"),
    "gait-swing-joints": (["train", HUMANOID, "--env.gait.swing-joint-offsets", "tail*", "0.3"], "match none"),
    "locked-joint": (["train", HUMANOID, "--env.robot.locked-joints", "tail"], "has no hinge joint 'tail'"),
    # distillation and symmetry
    "teacher-missing": (["train", STUDENT, *DISTIL, "{root}/none"], "no checkpoint file"),
    "teacher-of-other-task": (["train", STUDENT, *DISTIL, "{balance}"], "this task's teacher group"),
    "teacher-for-plain-task": (["train", GO1, *DISTIL, "{balance}"], "distil into a student task"),
    "symmetry-negative": (["train", BALANCE, "--algorithm.symmetry.mirror-loss-coef", "-1"], "at least 0"),
    "symmetry-without-mirrors": (["train", GO1, "--env.robot.mirror-names", "--algorithm.symmetry.augment", "True"],
                                 "has no mirror_names"),
    # SAC
    "sac-n-step-beyond-ring": (["train", BALANCE, "--algo", "sac", "--algorithm.n-step", "9",
                                "--algorithm.buffer-steps", "8"], "is longer than the ring"),
    "sac-ring-below-batch": (["train", BALANCE, "--algo", "sac", "--env.num-envs", "4", "--algorithm.buffer-steps",
                              "8", "--algorithm.batch-size", "64"], "fewer than a batch"),
    "sac-negative-temperature": (["train", BALANCE, "--algo", "sac", "--algorithm.init-temperature", "-1"],
                                 "--algorithm.init-temperature"),
    "sac-other-policy-kind": (["train", BALANCE, "--algo", "sac", "--policy.kind", "mlp"],
                              "--algo sac trains --policy.kind squashed"),
    # recurrent policies
    "rnn-burn-in-beyond-sequence": (["train", BALANCE, "--policy.rnn-type", "gru", "--policy.rnn-sequence-length", "4",
                                     "--policy.rnn-burn-in", "8"], "is shorter than --policy.rnn-burn-in 8"),
    "rnn-burn-in-never-run": (["train", BALANCE, "--policy.rnn-type", "gru", "--policy.rnn-sequence-length", "100",
                               "--policy.rnn-burn-in", "50", "--runner.num-steps-per-env", "32"],
                              "--policy.rnn-burn-in 50 is never run"),
    # tyro's wrapped messages, rejoined as one sentence
    "choice-one-sentence": (["train", BALANCE, "--policy.rnn-type", "rnn"],
                            "invalid choice 'rnn' for argument '--policy.rnn-type'. Expected one of ('none', 'lstm', "
                            "'gru')."),
    "rnn-windows-per-minibatch": (["train", BALANCE, "--policy.rnn-type", "gru", "--env.num-envs", "5",
                                   "--algorithm.num-mini-batches", "4"], "does not divide the update's 10 windows"),
    "rnn-for-sac": (["train", BALANCE, "--algo", "sac", "--policy.rnn-type", "lstm"], "kind has no memory"),
    "rnn-for-mlp-kind": (["train", BALANCE, "--policy.kind", "mlp", "--policy.rnn-type", "lstm"],
                         "the mlp policy kind has no memory"),
    "recurrent-kind-without-rnn": (["train", BALANCE, "--policy.kind", "recurrent"], "needs a memory"),
    "rnn-resume-other-memory": (["train", BALANCE, "--resume-dir", "{balance}", "--policy.rnn-type", "lstm"],
                                "trained with --policy.rnn-type none, this run asks for --policy.rnn-type lstm"),
    "rnn-student-without-actor-memory": (["train", STUDENT, *DISTIL, "{balance}", "--policy.rnn-type", "lstm",
                                          "--policy.rnn-networks", "critic"], "reads through an actor memory"),
    # video sizes and the launcher's counts
    "video-odd-size": (["play", BALANCE, "--run-dir", "{balance}", "--video", "{out}/clip.mp4", "--video-size", "17",
                        "17"], "even sizes only"),
    "video-tiny": (["play", BALANCE, "--run-dir", "{balance}", "--video", "{out}/clip.mp4", "--video-size", "8", "8"],
                   "--video-size"),
    "launcher-procs": (["train", BALANCE, "--nproc-per-node", "100000"], "cores this launcher may use"),
    "launcher-nodes": (["train", BALANCE, "--nproc-per-node", "1", "--nnodes", "0"], "--nnodes must be at least 1"),
    "launcher-restarts": (["train", BALANCE, "--nproc-per-node", "1", "--max-restarts", "-1"], "--max-restarts"),
    "fault-malformed": (["train", BALANCE, "--fault", "bogus"], "expected KIND@RANK:ITERATION"),
    "cuda-graphs-on-cpu": (["train", BALANCE, "--runner.cuda-graphs", "on"], "--runner.cuda-graphs on: the loop runs"),
    # mjrl slurm: nothing is written (--out) or submitted
    "slurm-no-nodes": (["mjrl", "slurm", BALANCE, "--nodes", "0", "--out", "{out}/job.sh"],
                       "--nodes must be at least 1"),
    "slurm-bad-time": (["mjrl", "slurm", BALANCE, "--time", "1:2:3:4", "--out", "{out}/job.sh"],
                       "not a Slurm time limit"),
    "slurm-time-under-warning": (["mjrl", "slurm", BALANCE, "--time", "1", "--out", "{out}/job.sh"],
                                 "is not longer than --warn-s 120"),
    "slurm-unknown-task": (["mjrl", "slurm", "Mjrl-Nope", "--out", "{out}/job.sh"], "unknown task 'Mjrl-Nope'"),
    "slurm-seeds-no-range": (["mjrl", "slurm", BALANCE, "--seeds", "8-1", "--out", "{out}/job.sh"], "is no range"),
    "slurm-seeds-garbage": (["mjrl", "slurm", BALANCE, "--seeds", "one-eight", "--out", "{out}/job.sh"],
                            "expected seeds and ranges"),
    "slurm-flag-the-script-sets": (["mjrl", "slurm", BALANCE, "--nnodes", "2", "--out", "{out}/job.sh"],
                                   "--nnodes is set by the batch script from --nodes"),
    "slurm-bad-train-flag": (["mjrl", "slurm", BALANCE, "--env.num-envs", "0", "--out", "{out}/job.sh"],
                             "--env.num-envs"),
    "slurm-more-ranks-than-gpus": (["mjrl", "slurm", BALANCE, "--gpus-per-node", "2", "--ranks-per-node", "4",
                                    "--out", "{out}/job.sh"], "is more than --gpus-per-node 2"),
    "slurm-task-that-cannot-be-built": (["mjrl", "slurm", "Mjrl-Tracking-Flat-Humanoid", "--env.motion.files",
                                         "{root}/none.npz", "--out", "{out}/job.sh"], "none.npz does not exist"),
    "slurm-out-under-a-file": (["mjrl", "slurm", BALANCE, "--out", "{root}/garbage.pt/job.sh"], "garbage.pt"),
    "slurm-out-a-folder": (["mjrl", "slurm", BALANCE, "--out", "{out}"], "Is a directory"),
    # mjrl motion record: the env's flags checked as play checks them (a ZeroDivisionError before)
    "record-bad-env-flag": (["mjrl", "motion", "record", BALANCE, "--run-dir", "{balance}", "--out", "{out}/m.npz",
                             "--env.sim.decimation", "0"], "--env.sim.decimation must be at least 1"),
    # Found by trying the command adversarially (issue 61): each one line before the policy runs.
    "record-out-under-a-file": (["mjrl", "motion", "record", BALANCE, "--run-dir", "{balance}", "--out",
                                 "{root}/garbage.pt/m.npz"], "a file stands where a folder must be"),
    "record-out-not-npz": (["mjrl", "motion", "record", BALANCE, "--run-dir", "{balance}", "--out", "{out}/m.txt"],
                           "a motion file's name ends in .npz"),
    "record-no-seconds": (["mjrl", "motion", "record", BALANCE, "--run-dir", "{balance}", "--out", "{out}/m.npz",
                           "--seconds", "0"], "--seconds 0: give a length in (0, 3600]"),
    "record-seconds-nan": (["mjrl", "motion", "record", BALANCE, "--run-dir", "{balance}", "--out", "{out}/m.npz",
                            "--seconds", "nan"], "--seconds must be a finite number"),
    "record-other-tasks-run": (["mjrl", "motion", "record", BALANCE, "--run-dir", "{swingup}", "--out",
                                "{out}/m.npz"], "belongs to task 'Mjrl-Cartpole-Swingup'"),
    "record-not-a-checkpoint": (["mjrl", "motion", "record", BALANCE, "--checkpoint", "{root}/garbage.pt", "--out",
                                 "{out}/m.npz"], "is unreadable"),
    "slurm-negative-gpus": (["mjrl", "slurm", BALANCE, "--gpus-per-node", "-1", "--out", "{out}/job.sh"],
                            "--gpus-per-node must be at least 0"),
    "slurm-no-time": (["mjrl", "slurm", BALANCE, "--time", "0", "--out", "{out}/job.sh"], "must be more than 0"),
    # mjrl buffers
    "buffers-unknown-task": (["mjrl", "buffers", "Mjrl-Nope"], "unknown task 'Mjrl-Nope'"),
    "buffers-no-steps": (["mjrl", "buffers", GO1, "--steps", "0"], "--steps must be at least 1"),
    "buffers-no-envs": (["mjrl", "buffers", GO1, "--num-envs", "0"], "--num-envs must be at least 1"),
    "buffers-bad-env-flag": (["mjrl", "buffers", GO1, "--env.sim.njmax", "0"], "--env.sim.njmax must be at least 1"),
    # --plugins: module names, not paths
    "plugins-a-file-path": (["train", BALANCE, "--plugins", "./my_tasks.py"], "give the module's name (my_tasks)"),
    "plugins-not-a-name": (["train", BALANCE, "--plugins", "my-tasks"], "not a module name"),
    "plugins-empty-name": (["train", BALANCE, "--plugins", ""], "not a module name"),
    "plugins-not-installed": (["train", BALANCE, "--plugins", "no_such_plugin_module"], "no such module"),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(case, files, tmp_path):
    argv, needle = CASES[case]
    out, logs = tmp_path / "out", tmp_path / "logs"
    out.mkdir()
    args = [a.format(out=out, **files) for a in argv]
    if args[0] == "train":
        args += ["--device", "cpu", "--logger", "none", "--log-root", str(logs)]
    result = run_main(*args)
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and needle in lines[0], result.stderr[-2000:]
    assert list(out.iterdir()) == [] and not logs.exists()


def test_wandb_asked_for_where_it_is_not_installed_is_one_line(monkeypatch, tmp_path):
    """The GPU machine's first run of the WandB test ended in a ModuleNotFoundError traceback:
    mjrl was installed there without its dependencies. `None` in sys.modules is how Python
    marks a module that cannot be imported."""
    monkeypatch.setitem(sys.modules, "wandb", None)
    result = run_main("train", BALANCE, "--device", "cpu", "--logger", "wandb", "--log-root", str(tmp_path / "logs"))
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        "train: error: --logger wandb needs the wandb package: pip install wandb, or pick --logger tensorboard"
    ]
    assert not (tmp_path / "logs").exists()


def test_the_launcher_counts_the_cores_this_process_may_use(tmp_path):
    """On a cluster node a job gets a few of the node's cores (Slurm's --cpus-per-task, taskset):
    the launcher's bound, and the update's threads, follow the process's CPU affinity, not the
    machine's count."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(allowed)})
    try:
        result = run_main("train", BALANCE, "--nproc-per-node", "9", "--device", "cpu", "--logger", "none",
                          "--log-root", str(tmp_path / "logs"))  # fmt: skip
    finally:
        os.sched_setaffinity(0, allowed)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        "train: error: --nproc-per-node 9 is more than 8 processes for each of the 1 cores this launcher may use; "
        "give at most 8"
    ]
    assert not (tmp_path / "logs").exists()


def test_an_aoti_export_without_a_cpp_compiler_is_one_line(files, tmp_path):
    """AOTInductor compiles C++ when exporting: a machine without a compiler gets a line saying
    so before any work (`train --export aoti` before its training), and nothing is written."""
    from torch._inductor import config

    out, logs = tmp_path / "out" / "policy.aoti.pt2", tmp_path / "logs"
    export = ["mjrl", "export", BALANCE, "--run-dir", str(files["balance"]), "--format", "aoti", "--out", str(out)]
    train = ["train", BALANCE, *TINY_RUN, "--export", "aoti", "--log-root", str(logs)]
    with config.patch({"cpp.cxx": (None, str(tmp_path / "no-such-compiler"))}):
        results = [run_main(*export), run_main(*train)]
    for result, command in zip(results, ("mjrl export", "train"), strict=True):
        assert result.returncode == 2, result.stderr[-2000:]
        assert result.stderr.splitlines() == [
            f"{command}: error: --format aoti compiles C++: install g++ (or name a compiler in CXX), or export pt2"
        ]
    assert not out.parent.exists() and not logs.exists()
