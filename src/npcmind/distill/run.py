"""One distill run: read a client's decisions, train each type that has enough, say how it went, write the file."""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from npcmind.distill.features import candidate_features
from npcmind.distill.train import TypeReport, fit, measure, split, type_policy
from npcmind.manifest import Manifest
from npcmind.storage import open_store
from npcmind.storage.base import TrainingRow
from npcmind_client.policy import FORMAT, FORMAT_VERSION

MIN_DECISIONS = 100  # of a type, to train it: fewer leave a fifth too small to say anything


@dataclass(slots=True)
class Outcome:
    """What a run gave: the policy file (None when no type had enough decisions) and what to tell the user."""

    policy: dict[str, Any] | None
    lines: list[str] = field(default_factory=list)
    reports: list[TypeReport] = field(default_factory=list)


class Progress:
    """A progress bar on a terminal, a line a step elsewhere (a log keeps them)."""

    def __init__(self, total: int, out: IO[str] | None = None) -> None:
        self.total, self.done = max(total, 1), 0
        self.out = out
        self.tty = bool(out is not None and out.isatty())

    def step(self, label: str) -> None:
        """One step done: the bar moves."""
        if self.out is None:
            return
        self.done += 1
        filled = round(24 * self.done / self.total)
        line = f"[{'#' * filled}{'.' * (24 - filled)}] {self.done}/{self.total} {label}"
        self.out.write(("\r" + line.ljust(72)) if self.tty else line + "\n")
        if self.tty and self.done == self.total:
            self.out.write("\n")
        self.out.flush()


async def _read(store_url: str, client_id: str, since: float) -> list[TrainingRow]:
    store = open_store(store_url, read_only=True)
    await store.open()
    try:
        return await store.training(client_id, since)
    finally:
        await store.close()


def read_rows(store_url: str, client_id: str, since_h: float | None) -> list[TrainingRow]:
    """The client's stored decisions (of the last ``since_h`` hours), read on this thread's own loop."""
    since = time.time() - since_h * 3600 if since_h else 0.0
    return asyncio.run(_read(store_url, client_id, since))


def _version(rows: list[TrainingRow], manifest: Manifest | None, lines: list[str]) -> tuple[str, list[TrainingRow]]:
    """The manifest version to distill for (the given manifest's, else the newest decision's), and its rows."""
    version = manifest.version if manifest is not None else rows[-1].manifest_version
    kept = [r for r in rows if r.manifest_version == version]
    if len(kept) < len(rows):
        lines.append(f"{len(rows) - len(kept):,} decisions of other manifest versions left out (for {version})")
    return version, kept


def _table(rep: TypeReport) -> list[str]:
    out = [
        f"{rep.name}: {rep.decisions:,} decisions, trained on {rep.trained:,}, {rep.held_back:,} held back: "
        f"agreement with the model {rep.agreement:.1%}",
        "  threshold  coverage  agreement",
    ]
    for th, cov, agr in rep.table:
        out.append(f"  {th:>9.2f}  {cov:>8.1%}  {('—' if agr is None else f'{agr:.1%}'):>9}")
    return out


def distill(
    rows: list[TrainingRow],
    client_id: str,
    manifest: Manifest | None = None,
    only: str | None = None,
    progress: IO[str] | None = None,
) -> Outcome:
    """Train every type (or ``only``) with at least MIN_DECISIONS decisions; the policy file and the report."""
    out = Outcome(None)
    if not rows:
        out.lines.append(f"no decisions of client {client_id!r} in the store: nothing to learn from")
        return out
    version, rows = _version(rows, manifest, out.lines)
    by_type: dict[str, list[TrainingRow]] = {}
    for r in rows:
        if only is None or r.type == only:
            by_type.setdefault(r.type, []).append(r)
    if only is not None and only not in by_type:
        out.lines.append(f"no decisions of type {only!r}: it has 0 and needs {MIN_DECISIONS}; no policy for it")
    ready = {t: rs for t, rs in by_type.items() if len(rs) >= MIN_DECISIONS}
    for t, rs in by_type.items():
        if t not in ready:
            out.lines.append(f"{t}: {len(rs)} decisions, needs {MIN_DECISIONS}: no policy for it")
    bar = Progress(3 * len(ready), progress)
    types: dict[str, Any] = {}
    for t, rs in ready.items():
        rep = _train_type(t, rs, manifest, lambda label, t=t: bar.step(f"{t}: {label}"))  # type: ignore[misc]
        out.reports.append(rep)
        out.lines += _table(rep)
        types[t] = rep.entry
    if types:
        out.policy = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "manifest_version": version,
            "client_id": client_id,
            "created_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "types": types,
        }
    return out


def _train_type(
    name: str, rows: list[TrainingRow], manifest: Manifest | None, step: Callable[[str], None]
) -> TypeReport:
    """Train on four fifths, measure on the fifth held back, with the evaluator a game runs."""
    train, held = split(rows)
    if manifest is not None and name in manifest.types:
        actions = list(manifest.types[name].actions)
    else:
        actions = sorted({a for r in rows for a in [r.action, *r.legal_actions]})
    entry = fit(train, candidate_features(name, rows, manifest), actions, step)
    agreement, table = measure(type_policy(entry), held)
    entry["trained_on"] = len(train)
    entry["agreement"] = round(agreement, 4)
    return TypeReport(name, len(rows), len(train), len(held), agreement, table, entry)


def write(policy: dict[str, Any], path: str) -> int:
    """Write the policy file; its size in bytes."""
    data = json.dumps(policy, separators=(",", ":"), allow_nan=False)
    with open(path, "w", encoding="utf-8") as f:
        f.write(data + "\n")
    return len(data) + 1


def main(store: str, client: str, out: str, only: str | None, since_h: float | None, manifest: Manifest | None) -> int:
    """`npcmind distill`: the exit code (1: no policy written)."""
    t0 = time.perf_counter()
    rows = read_rows(store, client, since_h)
    result = distill(rows, client, manifest, only, sys.stderr)
    for line in result.lines:
        print(line)
    if result.policy is None:
        print(f"no policy written to {out}")
        return 1
    size = write(result.policy, out)
    took = time.perf_counter() - t0
    print(f"wrote {out} ({size:,} bytes, types {', '.join(result.policy['types'])}) in {took:.1f} s")
    return 0
