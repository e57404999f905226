"""What a surface of the amplification harness is and how its cost is measured, so every owner's module reads alike.

A surface is one input path (a request, a provider's answer, a stored row read back, a file, what an SDK reads).
The harness feeds it a generated hostile input of size n, 8n and 64n and reads back what that one input cost:
seconds of CPU (or of a game's frame), the memory it added, and whether it was refused past its cap. Linear
work grows 8x a step; the harness flags a step that grows much faster, and any single input that holds the
process for long.
"""

from __future__ import annotations

import contextlib
import os
import reprlib
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cost:
    """What one input cost the process that read it."""

    seconds: float  # CPU seconds of the reading process (or the longest hold of its loop or frame)
    bytes: int = 0  # peak memory the input added; 0 when the surface cannot tell
    refused: bool = False  # the input passed its cap and was refused, or reading stopped at the cap
    note: str = ""  # what happened, in a few words (the error's first line, the status)


Feed = Callable[[int], Cost]


@dataclass(frozen=True)
class Surface:
    """One input path, its stated cap and a way to feed it a hostile input of size n."""

    name: str  # where the input enters: "POST /v1/decide, a chain of session scopes"
    unit: str  # what n counts: "scopes", "digits", "bytes"
    base: int  # n: the harness feeds n, 8n and 64n
    cap: str  # the stated cap, as the docs state it ("64 KiB a body, 413 past it")
    start: Callable[[], AbstractContextManager[Feed]]  # sets up what the feed needs (a service, a store)
    cap_at: int | None = None  # the size past which the input must be refused; None when nothing is refused
    steps: Sequence[int] = field(default=(1, 8, 64))
    spread: bool = False  # the cost is spread over many turns of the loop (a stream's reads): no one input holds it


def simple(feed: Feed) -> Callable[[], AbstractContextManager[Feed]]:
    """A surface's start for a feed that needs nothing set up."""

    @contextmanager
    def start() -> Iterator[Feed]:
        yield feed

    return start


def in_process(fn: Callable[[], Any], refused: Callable[[BaseException], bool] | None = None) -> Cost:
    """The CPU and peak Python memory of one call in this process: timed untraced (tracing slows Python several
    times), then run again traced for its memory. An exception the surface calls a refusal is one, any other
    propagates (it is a finding)."""
    note, was_refused = "", False
    t0 = time.process_time()
    try:
        out = fn()
        note = "" if out is None else reprlib.repr(out)[:80]
    except Exception as exc:
        if refused is None or not refused(exc):
            raise
        was_refused, note = True, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:120]
    seconds = time.process_time() - t0
    tracemalloc.start()
    with contextlib.suppress(Exception):  # the same input: refused again, as above
        fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return Cost(seconds, peak, was_refused, note)


def child(cmd: Sequence[str], stdin: bytes = b"", env: dict[str, str] | None = None, cwd: str | None = None) -> Ran:
    """Run a process to its end and read its own usage (wait4): for an SDK read in its own runtime (Node, Mono),
    where the input's cost is the whole process's, measured beside the same process fed a tiny input."""
    with tempfile.TemporaryFile() as fin, tempfile.TemporaryFile() as fout:
        fin.write(stdin)
        fin.seek(0)
        full_env = {**os.environ, **(env or {})}
        proc = subprocess.Popen(list(cmd), stdin=fin, stdout=fout, stderr=subprocess.STDOUT, env=full_env, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        fout.seek(0)
        out = fout.read()
    return Ran(ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, proc.returncode, out)


@dataclass(frozen=True)
class Ran:
    """A child process's CPU seconds, peak resident bytes, exit code and output."""

    seconds: float
    peak_bytes: int
    code: int
    out: bytes
