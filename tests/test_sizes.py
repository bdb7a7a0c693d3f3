"""Sizes a reader can take in (issue 62): no module under `src/` or `tasks/` over 420 lines, no
function or method over 60. A module that grows past it splits by concept (as `envs/observations.py`
left `envs/env.py`), a function by step."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 60


def modules() -> list[Path]:
    return sorted(p for folder in ("src", "tasks") for p in (ROOT / folder).rglob("*.py"))


def test_no_module_is_longer_than_420_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules by concept: {long}"


def test_no_function_is_longer_than_60_lines() -> None:
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (lines := node.end_lineno - start + 1) > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert not long, f"split these functions by step: {long}"
