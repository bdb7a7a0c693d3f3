"""`mjrl kernels` (`mjrl.tools.kernels`, formerly scripts/count_kernels.py): what it counts, and
its default mode end to end."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import run_main

from mjrl.tools.kernels import count_cpu


def test_the_kernel_counter_counts_launches_not_views_whoever_launches_them() -> None:
    import warp as wp

    @wp.kernel
    def double(values: wp.array(dtype=wp.float32)):
        i = wp.tid()
        values[i] = 2.0 * values[i]

    values = wp.full(4, 1.0, dtype=wp.float32, device="cpu")
    original_launch = wp.launch
    a, b = torch.ones(8), torch.ones(8)

    def step() -> None:
        c = a + b  # one kernel
        c.view(2, 4)[0].unsqueeze(0)  # views: none
        torch.mul(c, 2.0, out=b)  # one kernel
        wp.launch(double, dim=4, inputs=[values], device="cpu")  # one Warp launch

    figures = count_cpu(step, repeats=3)
    assert (figures["torch_kernels"], figures["torch_views"], figures["warp_launches"]) == (2, 3, 1)
    assert figures["launches"] == 3 and figures["names"]["warp:" + double.key] == 1
    assert values.numpy().tolist() == [8.0] * 4  # launched for real, three times
    assert wp.launch is original_launch  # and Warp is left as it was


def test_mjrl_kernels_counts_every_phase_of_a_task_in_its_default_mode() -> None:
    """Without `--compile` (its default) the counter once ended in a NameError: every phase of a
    task is counted, the launches being the torch kernels and Warp's together."""
    result = run_main("mjrl", "kernels", "--tasks", "Mjrl-Cartpole-Balance", "--num-envs", "4", "--steps", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [line["phase"] for line in lines] == ["env", "env+act", "minibatch"]
    for line in lines:
        assert line["compile"] == "off" and line["torch_kernels"] > 0
        assert line["launches"] == pytest.approx(line["torch_kernels"] + line["warp_launches"], abs=0.2)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--tasks", "Mjrl-Nope"], "Mjrl-Nope"),
        (["--num-envs", "0"], "--num-envs must be"),
        (["--compile", "x"], "--compile"),
    ],
)
def test_mjrl_kernels_refuses_bad_input_in_one_line(flags: list[str], needle: str) -> None:
    result = run_main("mjrl", "kernels", *flags)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and needle in result.stderr and len(lines) == 1, result.stderr
