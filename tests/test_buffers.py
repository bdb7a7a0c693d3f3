"""`mjrl buffers TASK` (`mjrl.tools.buffers`, formerly `scripts/bench_train.py --check-buffers`):
what it measures, and the verdict a task author reads off it."""

from __future__ import annotations

import json

from conftest import run_main

GO1 = "Mjrl-Velocity-Flat-Quadruped"


def measure(*flags: str) -> tuple[int, dict]:
    result = run_main("mjrl", "buffers", GO1, "--num-envs", "4", "--steps", "20", *flags)
    assert result.returncode in (0, 1), result.stderr[-2000:]
    (line,) = [json.loads(text) for text in result.stdout.splitlines() if text.startswith("{")]
    return result.returncode, line


def test_mjrl_buffers_sees_the_quadrupeds_feet_at_every_substep_and_judges_its_buffers() -> None:
    """The peaks are of a robot on the ground (its contacts, each at least one constraint row),
    measured in buffers that did not overflow, and the task's 24 / 72 hold them. The check once
    saw no contact at all: the physics replayed as a captured graph skipped the substeps it
    counts in, leaving every peak at 0."""
    code, line = measure()
    from mjrl.tasks import load_task

    sim = load_task(GO1).env_cfg.sim
    assert code == 0 and (line["nconmax"], line["njmax"], line["num_envs"]) == (sim.nconmax, sim.njmax, 4)
    for key in ("random_actions", "thrown"):
        peak = line[key]
        assert 0 < peak["max_contacts_per_world_on_average"] <= peak["max_contacts_in_a_world"], (key, peak)
        assert peak["max_constraint_rows_in_a_world"] >= peak["max_contacts_in_a_world"], (key, peak)
        assert peak["overflow_flags"] == 0 and peak["measured_whole"], (key, peak)
        assert peak["contacts_fit"] and peak["rows_fit"], (key, peak)


def test_mjrl_buffers_fails_a_task_whose_buffers_random_actions_overflow() -> None:
    """Buffers below the measured peaks (`--env.sim.*`, as a task would set them): exit code 1,
    the verdict naming the buffer that overflows; the peaks themselves are the same measurement."""
    _, fitting = measure()
    code, line = measure("--env.sim.njmax", "4", "--env.sim.nconmax", "100")
    assert code == 1 and line["random_actions"]["rows_fit"] is False and line["random_actions"]["contacts_fit"]
    rows = "max_constraint_rows_in_a_world"
    assert line["random_actions"][rows] == fitting["random_actions"][rows]
