"""A rank uses the GPU its `LOCAL_RANK` names, never "the" GPU: a lint over the package finds
calls that mean the current device (cuda:0 in a process that never chose one), such as a bare
`torch.device("cuda")`, `.to("cuda")`, `device="cuda"`, `.cuda()`, or a device-less
`torch.cuda.current_stream()`, `synchronize()`, `default_stream()` or event `record()` (issue 59:
the segment clock's events once landed on cuda:0 so)."""

from __future__ import annotations

import ast
from pathlib import Path

import mjrl

PACKAGE = Path(mjrl.__file__).parent
TASKS = PACKAGE.parent.parent / "tasks"
DEVICE_LESS = {"current_stream", "synchronize", "default_stream"}


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
        )  # fmt: skip
        if bare:
            found.append(node.lineno)
    return found


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
    ]
    for line in injected:
        assert bare_cuda_calls(line) == [1], line
    allowed = ['torch.device("cuda", rank)', "torch.cuda.current_stream(device)", 'x.to("cpu")',
               'device.type == "cuda"', "torch.cuda.synchronize(device)", 'x.to(device, "cuda")',
               "stream.synchronize()", "event.synchronize()"]  # fmt: skip
    for line in allowed:
        assert bare_cuda_calls(line) == [], line
