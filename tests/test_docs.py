"""The documentation stays navigable and true: the MkDocs site of `docs/` builds strictly (a
broken link, anchor or a page left out of the nav fails it), the README stays short and its
links resolve, every heading of the former long README lives on in `docs/`, every file the
design notes' extension table names exists, and every bash block of the docs either runs here
(the cheap ones: help, a shipped motion, a printed Slurm script) or says why it is not run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
BIN = Path(sys.executable).parent  # the venv's bin: train, play, mjrl (not resolved: a venv's python is a link)

README_MAX_LINES = 160

# Every `##` and `###` heading of the README before it was split into `docs/` (issue 62): each
# must stay a heading of some page there, so that nothing the README said was dropped.
FORMER_README_HEADINGS = (
    "Quick start",
    "Training",
    "What a run writes",
    "Evaluating",
    "Rough terrain",
    "The quadruped on a CPU",
    "On a GPU",
    "The humanoid on a CPU",
    "Motion tracking",
    "Off-policy: SAC",
    "Symmetry and distillation",
    "Checking a PPO change against rsl_rl",
    "See your policy",
    "Reference motions",
    "Distributed",
    "Fault tolerance",
    "Bad input",
    "Layout",
)

SHELL_FENCE = re.compile(r"^```(bash|sh|shell|console)\s*$")
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>.*?) -->$")
LINK = re.compile(r"\]\(([^)\s]+)\)")
RUN_TIMEOUT_S = 120

# The only commands an unmarked block may hold: each runs in a few seconds and writes nothing.
# Anything else (a training, a benchmark, a GPU) needs a `<!-- not run: REASON -->` marker; the
# test refuses to run it rather than start a long job in the suite.
CHEAP_COMMANDS = (
    re.compile(r"(train|play|mjrl)( [^|;&>]*)? --help"),
    re.compile(r"mjrl list"),
    re.compile(r"mjrl motion info mjrl:motions/\S+\.npz"),
    re.compile(r"mjrl slurm (?!.*--(submit|out)\b)[^|;&>]*"),  # printed, neither submitted nor written
)


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def outside_fences(lines: list[str]) -> list[tuple[int, str]]:
    """(index, line) of the lines that are not inside a fenced code block (fences excluded)."""
    kept, fenced = [], False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            kept.append((i, line))
    return kept


def shell_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """Each shell block of a Markdown file: its fence's line number (1-based), its text, and the
    reason of the `<!-- not run: REASON -->` marker just before it (on the line before the fence,
    or before one blank line), or None when it has none."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if SHELL_FENCE.match(lines[i]):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), len(lines))
            before = lines[i - 1] if i >= 1 and lines[i - 1].strip() else (lines[i - 2] if i >= 2 else "")
            marker = NOT_RUN.match(before.strip())
            blocks.append((i + 1, "\n".join(lines[i + 1 : end]), marker["reason"] if marker else None))
            i = end
        i += 1
    return blocks


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, comments and blank lines left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [c for line in joined.splitlines() if (c := re.sub(r"(^|\s+)#.*$", "", line).strip())]


def run_mkdocs(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def test_the_site_builds_strictly_with_every_page_in_its_nav(tmp_path: Path) -> None:
    result = run_mkdocs(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    for page in ("training", "tasks", "distributed", "gpu", "tracking", "export", "faults", "bad-input", "design"):
        assert (tmp_path / "site" / page / "index.html").is_file(), page


def test_a_broken_link_between_pages_fails_the_strict_build(tmp_path: Path) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "index.md").open("a") as page:
        page.write("\nSee [a page that is not there](no-such-page.md).\n")
    result = run_mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stderr


def test_the_readme_is_at_most_160_lines() -> None:
    assert len(README.read_text().splitlines()) <= README_MAX_LINES


def test_the_readme_quick_start_keeps_the_set_up_and_test_commands() -> None:
    text = README.read_text()
    for command in (
        "bash scripts/setup.sh && .venv/bin/train Mjrl-Cartpole-Balance",
        "bash scripts/test.sh",
        "bash scripts/test_slurm.sh",
    ):
        assert f"\n{command}\n" in text, command


def test_every_relative_link_in_the_readme_points_at_an_existing_file() -> None:
    targets = [t for t in LINK.findall(README.read_text()) if not re.match(r"^[a-z]+:", t) and not t.startswith("#")]
    assert targets, "the README links no page of docs/"
    missing = [t for t in targets if not (REPO / t.split("#")[0]).is_file()]
    assert not missing, missing


def test_every_heading_of_the_former_readme_is_a_heading_in_docs() -> None:
    headings = set()
    for page in DOCS.rglob("*.md"):
        for _, line in outside_fences(page.read_text().splitlines()):
            if match := re.match(r"^#{1,6} (.+?)\s*$", line):
                headings.add(match[1])
    assert not [h for h in FORMER_README_HEADINGS if h not in headings]


def test_every_file_the_design_notes_extension_table_names_exists() -> None:
    text = (DOCS / "design.md").read_text()
    section = text.split("## Where extensions plug in\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    named = {span for row in rows for span in re.findall(r"`([^`]+)`", row) if re.match(r"^(src|tasks|tests)/", span)}
    kinds = ("a task", "a robot", "a terrain type", "a term", "an algorithm", "a policy kind", "a storage consumer")
    for kind in kinds:
        assert any(row.startswith(f"| {kind} ") for row in rows), kind
    assert len(named) >= 10
    assert not [path for path in sorted(named) if not (REPO / path).exists()]


def test_every_not_run_marker_gives_a_reason_and_stands_before_a_shell_block() -> None:
    problems = []
    for path in markdown_files():
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if "<!-- not run" not in line:
                continue
            marker = NOT_RUN.match(line.strip())
            after = lines[i + 1 : i + 3]  # the fence, on the next line or after one blank line
            fence = after[0] if after and after[0].strip() else (after[1] if len(after) == 2 else "")
            if not marker or not marker["reason"].strip() or not SHELL_FENCE.match(fence):
                problems.append(f"{path.relative_to(REPO)}:{i + 1}: {line}")
    assert not problems, problems


UNMARKED = [
    pytest.param(text, id=f"{path.relative_to(REPO)}:{line}")
    for path in markdown_files()
    for line, text, reason in shell_blocks(path)
    if reason is None
]


def test_the_docs_run_a_handful_of_their_shell_blocks() -> None:
    # The rest say why not (a training, a GPU, a cluster); these few keep the suite's time small.
    assert 3 <= len(UNMARKED) <= 6, [p.id for p in UNMARKED]


@pytest.mark.parametrize("block", UNMARKED)
def test_a_shell_block_without_a_not_run_marker_holds_only_cheap_commands_and_runs(block: str) -> None:
    costly = [c for c in commands(block) if not any(cheap.fullmatch(c) for cheap in CHEAP_COMMANDS)]
    assert not costly, f"mark the block <!-- not run: REASON --> or keep it to cheap commands: {costly}"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()
