"""A rank uses the GPU its `LOCAL_RANK` names, never "the" GPU: a lint over the package finds
calls that mean the current device (cuda:0 in a process that never chose one), such as a bare
`torch.device("cuda")`, `.to("cuda")`, `device="cuda"`, `.cuda()`, or a device-less
`torch.cuda.current_stream()`, `synchronize()`, `default_stream()` or event `record()` (issue 59:
the segment clock's events once landed on cuda:0 so); Warp's calls that take a device or a
stream without one (Warp's "current device" is cuda:0 too), and a `torch.Generator` without a
device. What is left is derived from the rank's device by construction: its index from
`LOCAL_RANK` (`pick_cuda_device`), Warp's device from it (`warp_device_name`), and from those
Warp's stream (torch's current stream of that device), memory pool and captures."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mjrl

PACKAGE = Path(mjrl.__file__).parent
TASKS = PACKAGE.parent.parent / "tasks"
DEVICE_LESS = {"current_stream", "synchronize", "default_stream"}
WARP_DEVICE_CALLS = {"get_device", "synchronize_device", "is_mempool_enabled", "ScopedDevice", "stream_from_torch",
                     "ScopedCapture", "set_mempool_enabled", "get_stream"}  # fmt: skip
"""Warp's functions that act on a device (or stream), the current one when given none."""


def bare_cuda_calls(source: str) -> list[int]:
    """Lines of the calls in `source` that name the CUDA device without saying which."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        strings = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in node.keywords}
        bare = (
            (name in ("device", "to", "get_device") and "cuda" in strings and len(node.args) == 1)
            or (isinstance(keywords.get("device"), ast.Constant) and keywords["device"].value == "cuda")
            or (name == "cuda" and not node.args and not node.keywords and isinstance(node.func, ast.Attribute)
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"))
            or (name in DEVICE_LESS and not node.args and not node.keywords and _of_torch_cuda(node.func))
            or (name == "record" and not node.args and not node.keywords)  # a CUDA event on the current stream
            or (name in WARP_DEVICE_CALLS and _of(node.func, "wp") and not node.args and not node.keywords)
            or (name == "Generator" and _of(node.func, "torch") and "device" not in keywords and not node.args)
        )  # fmt: skip
        if bare:
            found.append(node.lineno)
    return found


def _of(func: ast.expr, module: str) -> bool:
    """`func` is `module.NAME`."""
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == module


def _of_torch_cuda(func: ast.expr) -> bool:
    """`func` is `torch.cuda.NAME` (not a stream's or an event's own `synchronize`)."""
    owner = func.value if isinstance(func, ast.Attribute) else None
    if isinstance(owner, ast.Attribute):
        return owner.attr == "cuda"
    return isinstance(owner, ast.Name) and owner.id == "cuda"


def test_no_module_names_the_cuda_device_without_saying_which():
    files = sorted([*PACKAGE.rglob("*.py"), *TASKS.rglob("*.py")])
    assert len(files) > 50
    findings = [f"{path}:{line}" for path in files for line in bare_cuda_calls(path.read_text())]
    assert not findings, f"calls that mean the current CUDA device, not the rank's: {findings}"


def test_the_lint_finds_each_way_of_naming_the_current_device():
    injected = [
        'torch.device("cuda")',
        'x.to("cuda")',
        'torch.zeros(3, device="cuda")',
        "x.cuda()",
        "torch.cuda.current_stream()",
        "torch.cuda.synchronize()",
        'wp.get_device("cuda")',
        "event.record()",
        "wp.synchronize_device()",
        "wp.ScopedCapture()",
        "wp.get_device()",
        "wp.stream_from_torch()",
        "torch.Generator()",
    ]
    for line in injected:
        assert bare_cuda_calls(line) == [1], line
    allowed = ['torch.device("cuda", rank)', "torch.cuda.current_stream(device)", 'x.to("cpu")',
               'device.type == "cuda"', "torch.cuda.synchronize(device)", 'x.to(device, "cuda")',
               "stream.synchronize()", "event.synchronize()", "wp.synchronize_device(self.wp_device)",
               "wp.ScopedCapture(device=d)", "torch.Generator(device=device)", "torch.Generator(device)"]  # fmt: skip
    for line in allowed:
        assert bare_cuda_calls(line) == [], line


def test_a_ranks_devices_follow_its_local_rank():
    """Without a GPU, by construction: the rank of LOCAL_RANK r among 4 on a node of 4 GPUs takes
    cuda:r, and Warp's device is that one, named with its index (never Warp's current device)."""
    import torch

    from mjrl.distributed.devices import pick_cuda_device
    from mjrl.sim.simulation import warp_device_name

    for local_rank in range(4):
        index = pick_cuda_device("cuda", None, local_rank, 4, 4, own_devices=False)
        assert index == local_rank
        assert warp_device_name(torch.device("cuda", index)) == f"cuda:{local_rank}"
    # A rank given GPUs of its own (SLURM --gpus-per-task=1) sees one: its cuda:0 is its own.
    assert pick_cuda_device("cuda", None, 3, 4, 1, own_devices=True) == 0
    assert warp_device_name(torch.device("cpu")) == "cpu"
    with pytest.raises(ValueError, match="names its index"):
        warp_device_name(torch.device("cuda"))
