"""Writes the filesystem refuses (a full disk, a quota, a file-size limit): the run stops with one
line naming the file, the previous checkpoint stays whole, nothing half-written is left, and
the run resumes once there is room. RLIMIT_FSIZE makes every write past a size fail with EFBIG,
as ENOSPC would, without special mounts, for root too."""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path

import pytest
from conftest import TINY_RUN, last_json, run_cli, run_main

from mjrl.metrics_file import read_metrics

TASK = "Mjrl-Cartpole-Balance"


def start_run(log_root: Path, *args: str, iterations: int = 2) -> Path:
    result = run_main("train", TASK, *TINY_RUN, "--log-root", str(log_root), "--runner.max-iterations", str(iterations),
                      "--runner.save-interval", "1", *args)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return Path(last_json(result.stdout)["run_dir"])


def assert_one_line_naming(result, path: Path) -> None:
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("train: error:")]
    assert len(lines) == 1 and f"cannot write {path}: File too large" in lines[0], result.stderr[-2000:]
    assert "--resume True" in lines[0]


def test_a_checkpoint_that_cannot_be_written_leaves_the_previous_one_and_the_run_resumes(log_root):
    run_dir = start_run(log_root)
    previous = run_dir / "checkpoints" / "model_000002.pt"
    before = previous.read_bytes()
    full = run_cli("train", TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--runner.max-iterations", "4",
                   "--runner.save-interval", "1", file_size_limit=len(before) // 2)  # fmt: skip
    assert_one_line_naming(full, run_dir / "checkpoints" / "model_000003.pt")
    assert previous.read_bytes() == before
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["model_000001.pt", "model_000002.pt"]
    # Room again: the run goes on from its last checkpoint, each iteration logged once.
    again = run_main("train", TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--runner.max-iterations", "4")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [row["iteration"] for row in read_metrics(run_dir / "metrics.jsonl")] == [0, 1, 2, 3]


def test_a_metrics_line_that_cannot_be_written_is_cut_back_to_the_last_whole_line(log_root):
    # Four lines first: the limit below must let the resume write its config file (a config
    # grows with every documented setting), so the metrics file must be the larger one.
    run_dir = start_run(log_root, iterations=4)
    metrics = run_dir / "metrics.jsonl"
    line = len(metrics.read_text().splitlines()[-1]) + 1
    assert metrics.stat().st_size > (run_dir / "config.yaml").stat().st_size
    # Room for the four kept lines and half of a fifth; checkpoints only at the end.
    full = run_cli("train", TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--runner.max-iterations", "8",
                   "--runner.save-interval", "100", file_size_limit=metrics.stat().st_size + line // 2)  # fmt: skip
    assert_one_line_naming(full, metrics)
    assert [json.loads(text)["iteration"] for text in metrics.read_text().splitlines()] == [0, 1, 2, 3]
    assert metrics.read_text().endswith("\n")
    again = run_main("train", TASK, *TINY_RUN, "--resume-dir", str(run_dir), "--runner.max-iterations", "5")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [row["iteration"] for row in read_metrics(metrics)] == [0, 1, 2, 3, 4]


@pytest.mark.heavy
def test_exports_plots_and_videos_that_cannot_be_written_leave_nothing(log_root, tmp_path):
    run_dir = start_run(log_root)
    out = tmp_path / "out"
    out.mkdir()
    cases = [
        ("mjrl", "export", TASK, "--run-dir", str(run_dir), "--out", str(out / "policy.onnx")),
        ("mjrl", "plot", str(run_dir), "--out", str(out / "curves.png")),
        ("play", TASK, "--run-dir", str(run_dir), "--device", "cpu", "--episodes", "1", "--video", str(out / "v.mp4"),
         "--env.episode-length-s", "1"),
    ]  # fmt: skip
    # Side by side (each writes its own file, and each must leave none): the three commands'
    # imports take most of their time, on both cores.
    with concurrent.futures.ThreadPoolExecutor(len(cases)) as pool:
        results = list(pool.map(lambda args: run_cli(*args, file_size_limit=200), cases))
    for args, result in zip(cases, results, strict=True):
        assert result.returncode == 2, (args, result.stderr[-2000:])
        assert "Traceback" not in result.stderr and f"cannot write {out}/" in result.stderr, result.stderr[-2000:]
    assert list(out.iterdir()) == []


def test_an_export_whose_sidecar_cannot_be_written_leaves_no_model(log_root, tmp_path):
    run_dir = start_run(log_root)
    out = tmp_path / "out"
    (out / "policy.onnx.json").mkdir(parents=True)  # the sidecar's path is taken by a directory
    result = run_main("mjrl", "export", TASK, "--run-dir", str(run_dir), "--out", str(out / "policy.onnx"))
    assert result.returncode == 2 and f"cannot write {out}/policy.onnx.json" in result.stderr, result.stderr[-2000:]
    assert [p.name for p in out.iterdir()] == ["policy.onnx.json"]  # no model, no temporary file
