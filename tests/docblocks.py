"""The code blocks of the docs a user reads, and the mark before each: which test runs it, or why none can.

A block of code (shell, Python, TypeScript, JavaScript, HTML) is preceded by one HTML comment, which a
reader of the rendered page does not see: `<!-- run by test_x.py::test_name (how) -->` or `<!-- not run:
why -->`. tests/test_readme.py holds every block to having one, so a new example cannot slip in unrun."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from conftest import ROOT, until

# the docs a user reads: the README, docs/, and each SDK's README
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "clients" / "python" / "README.md",
    ROOT / "clients" / "typescript" / "README.md",
]
CODE = {"sh", "bash", "shell", "console", "python", "py", "ts", "typescript", "js", "javascript", "mjs", "html"}
CODE |= {"csharp"}  # the C# SDK's examples: compiled by clients/csharp/Build~/build.sh, named by test_csharp.py
DATA = {"", "json", "yaml", "toml", "text"}  # outputs and data: what a command printed, a file's format
RUN = re.compile(r"<!-- run by (?P<file>test_\w+\.py)::(?P<test>test_\w+)\b.*-->$")
NOT_RUN = re.compile(r"<!-- not run: (?P<why>\S.*\S) -->$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text, and the line just before its fence."""

    path: Path
    line: int
    lang: str
    text: str
    mark: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, in order."""
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = lines[i - 1].strip() if i else ""
        found.append(Block(path, i + 1, fence.group(1), "\n".join(lines[i + 1 : end]) + "\n", mark))
        i = end + 1
    return found


def run_by(path: Path, test: str) -> list[Block]:
    """The blocks of a file that it says the given test runs: the test takes its code from here."""
    mine = [b for b in blocks(path) if (m := RUN.match(b.mark)) and m["test"] == test]
    assert mine, f"no block of {path.relative_to(ROOT)} says it is run by {test}"
    return mine


@contextlib.contextmanager
def started(script: str, cwd: Path, out: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A shell block pasted whole, in a process group of its own: its output (with that of the servers it starts
    with `&`) goes to a file; what it left running is stopped on leaving."""
    with out.open("w") as sink:
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=cwd,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    try:
        yield proc
    finally:
        stop_group(proc)


def bash(script: str, cwd: Path, out: Path, timeout: float = 120, env: dict[str, str] | None = None) -> int:
    """A shell block run to its end (the servers it started stopped after): the exit status of its last command."""
    with started(script, cwd, out, env) as proc:
        return proc.wait(timeout=timeout)


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """The block's process group, background servers included (SIGTERM: they close their stores), gone."""
    pgid = proc.pid  # the group's leader: bash, started in a session of its own
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return

    def gone() -> bool:
        proc.poll()  # bash itself, once ended, stays in the group until reaped
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return False

    until(gone, "the processes the block started to stop", 60)
