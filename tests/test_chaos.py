"""The chaos soak's short version: a 2-rank job killed and preempted, each for real, then
checked (`scripts/bench_chaos.py`, whose 20-minute run is a benchmark), for PPO and for SAC
(whose checkpoints carry its replay ring)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bench_chaos.py"
SEQUENCE = {"ppo": ["kill", "preempt"], "sac": ["preempt"]}
"""SAC is preempted only: a restart after a kill resumes through the same checkpoint code as a
preemption's (both ranks load it, its ring beside it), which PPO's kill already covers. The
kill cost the suite 15 s (issue 61)."""


@pytest.mark.heavy
@pytest.mark.parametrize("algo", ["ppo", "sac"])
def test_a_job_killed_and_preempted_loses_no_iteration_and_still_plays(tmp_path, algo):
    # A stopped (hung) rank, the soak's third fault, is left to the soak itself and to
    # test_faults.py's watchdog test: here it cost 20 s of the suite's budget for no other check.
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--log-root", str(tmp_path), "--sequence", *SEQUENCE[algo],
         "--gap-s", "1", "2", "--save-interval", "10", "--algo", algo],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    faults, summary = lines[:-1], lines[-1]
    assert [f["fault"] for f in faults] == SEQUENCE[algo]
    # Each restart goes on from the newest checkpoint: at most an interval is redone; a
    # preemption writes one as it stops and redoes nothing.
    assert all(0 <= f["redone"] <= 10 for f in faults) and faults[-1]["redone"] == 0
    assert summary["continuous"] and summary["duplicates"] == 0 and summary["plays"] and summary["algo"] == algo
    assert summary["bulk_files"] == (1 if algo == "sac" else 0)  # SAC's newest ring, kept beside its checkpoint
    # Each fault may add one checkpoint (the stop it causes writes one, off the interval), and
    # the logs a few lines: disk use grows with the faults, not beyond.
    extra = summary["checkpoints"] - summary["fault_free_checkpoints"]
    names = {k: summary[k] for k in ("checkpoint_names", "fault_free_checkpoint_names", "fault_free_exit")}
    assert 0 <= extra <= len(faults), f"{faults} {names}"
    growth = summary["disk_bytes"] - summary["fault_free_disk_bytes"]
    assert growth <= extra * summary["checkpoint_bytes"] + 100_000
