"""One distill run: read a client's decisions, train each type that has enough, say how it went, write the file."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from npcmind.distill.features import candidate_features
from npcmind.distill.train import TypeReport, fit, measure, split, type_policy
from npcmind.manifest import Manifest
from npcmind.storage import open_store
from npcmind.storage.base import StoredPolicy, TrainingRow, TrainingRows
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


def count(n: int, noun: str) -> str:
    """'1 decision', '2,000 decisions': the lines read as English at any count."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


async def _read(store_url: str, client_id: str, since: float) -> TrainingRows:
    store = open_store(store_url, read_only=True)
    await store.open()
    try:
        return await store.policies.training(client_id, since)
    finally:
        await store.close()


def read_rows(store_url: str, client_id: str, since_h: float | None) -> TrainingRows:
    """The client's stored decisions (of the last ``since_h`` hours), read on this thread's own loop; with the rows
    skipped past a read-back cap, counted (docs/policy.md)."""
    since = time.time() - since_h * 3600 if since_h else 0.0
    return asyncio.run(_read(store_url, client_id, since))


def _version(rows: list[TrainingRow], manifest: Manifest | None, lines: list[str]) -> tuple[str, list[TrainingRow]]:
    """The manifest version to distill for (the given manifest's, else the newest decision's), and its rows."""
    version = manifest.version if manifest is not None else rows[-1].manifest_version
    kept = [r for r in rows if r.manifest_version == version]
    if len(kept) < len(rows):
        lines.append(f"{count(len(rows) - len(kept), 'decision')} of other manifest versions left out (for {version})")
    return version, kept


def _table(rep: TypeReport) -> list[str]:
    out = [
        f"{rep.name}: {count(rep.decisions, 'decision')}, trained on {rep.trained:,}, {rep.held_back:,} held back: "
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
    if isinstance(rows, TrainingRows):  # what was not read: rows past a read-back cap, damaged, or past the run's
        out.lines += rows.said()
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
            out.lines.append(f"{t}: {count(len(rs), 'decision')}, needs {MIN_DECISIONS}: no policy for it")
    bar = Progress(3 * len(ready), progress)
    types: dict[str, Any] = {}
    for t, rs in ready.items():
        try:  # one type's failure is that type's: the others still get their trees
            rep = _train_type(t, rs, manifest, lambda label, t=t: bar.step(f"{t}: {label}"))  # type: ignore[misc]
        except Exception as e:
            out.lines.append(
                f"{t}: training failed ({e.__class__.__name__}: {' '.join(str(e).split())[:300]}); no policy for it"
            )
            continue
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
    if manifest is not None and name in manifest.types:
        actions = list(manifest.types[name].actions)
        rows = [r for r in rows if r.action in actions]  # a decision of an action the type no longer has
    else:
        actions = sorted({a for r in rows for a in [r.action, *r.legal_actions]})
    train, held = split(rows)
    entry = fit(train, candidate_features(name, rows, manifest), actions, step)
    agreement, table = measure(type_policy(entry), held)
    entry["agreement"] = round(agreement, 4)  # trained_on: what the fit took (fair_rows: maybe fewer than train)
    return TypeReport(name, len(rows), entry["trained_on"], len(held), agreement, table, entry)


def _store_files(store_url: str) -> list[Path]:
    """The files a SQLite store is made of: its database, its WAL, its shared memory, its lock, its journal, its
    pending streamed rows."""
    if not store_url.startswith("sqlite:///"):
        return []
    db = Path(store_url[len("sqlite:///") :] or "npcmind.db")
    return [db, *(Path(str(db) + end) for end in ("-wal", "-shm", "-journal", ".lock", ".pending"))]


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file: by their resolved names, or by the file itself (a hard link)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _mode(path: Path) -> int:
    """The permissions the policy file gets: those of the one it replaces, else what open() would have given."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


class Output:
    """The policy file to write, checked before the store is read: a run of minutes must not end in a traceback
    on a path it could never write, and the store's own files are never written over (a policy written on the
    store's database had turned it into JSON, and the live service answered 503 from then on)."""

    def __init__(self, path: str, store_url: str) -> None:
        self.path = Path(path)
        if any(_same(self.path, f) for f in _store_files(store_url)):
            raise ValueError(f"--out {path} is a file of the store {store_url}: give the policy a file of its own")
        if self.path.is_dir():
            raise ValueError(f"--out {path} is a folder: give a file name in it")
        folder = self.path.parent
        if not folder.is_dir():
            raise ValueError(f"--out {path}: the folder {folder} does not exist")
        try:  # the file it will be written to first, in the same folder, so the rename never crosses a disk
            fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=folder)
        except OSError as e:
            raise ValueError(f"--out {path} cannot be written: {e.strerror or e}") from None
        self._fd, self._tmp = fd, tmp

    def write(self, policy: dict[str, Any]) -> int:
        """Write the policy whole, then put it in place: a reader sees the old file or the new, never half."""
        data = (json.dumps(policy, separators=(",", ":"), allow_nan=False) + "\n").encode()
        with os.fdopen(self._fd, "wb") as f:
            os.fchmod(f.fileno(), _mode(self.path))  # a temporary file is the owner's only; the policy is not
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._fd = -1
        os.replace(self._tmp, self.path)
        return len(data)

    def discard(self) -> None:
        """No policy to write: leave nothing behind."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)


def write(policy: dict[str, Any], path: str) -> int:
    """Write the policy file (as a whole, then renamed into place); its size in bytes."""
    return Output(path, "").write(policy)


async def _publish(store_url: str, client_id: str, version: str, data: bytes) -> bool:
    """Keep the policy in the store, where GET /v1/policy finds it; False when the one kept is the same."""
    store = open_store(store_url, publish=True)
    await store.open()
    try:
        kept = await store.policies.get(client_id, version)
        if kept is not None and same_policy(kept.data, data):
            return False
        await store.policies.put(StoredPolicy(client_id, version, time.time(), data))
        return True
    finally:
        await store.close()


def same_policy(a: bytes, b: bytes) -> bool:
    """Two policy files that differ at most in when they were made: a new one of the same content changes no ETag."""
    try:
        x, y = json.loads(a), json.loads(b)
    except ValueError:
        return False
    if not isinstance(x, dict) or not isinstance(y, dict):
        return False
    x.pop("created_at", None)
    y.pop("created_at", None)
    return bool(x == y)


def main(
    store: str,
    client: str,
    out: str | None,
    only: str | None,
    since_h: float | None,
    manifest: Manifest | None,
    publish: bool = False,
) -> int:
    """`npcmind distill`: the exit code (1: no policy written)."""
    t0 = time.perf_counter()
    target = Output(out, store) if out is not None else None
    try:
        rows = read_rows(store, client, since_h)
        result = distill(rows, client, manifest, only, sys.stderr)
    except BaseException:
        if target is not None:
            target.discard()
        raise
    for line in result.lines:
        print(line)
    if result.policy is None:
        if target is not None:
            target.discard()
        print(f"no policy written{f' to {out}' if out else ''}")
        return 1
    types = ", ".join(result.policy["types"])
    if target is not None:
        size = target.write(result.policy)
        print(f"wrote {out} ({size:,} bytes, types {types}) in {time.perf_counter() - t0:.1f} s")
    if publish:
        data = json.dumps(result.policy, separators=(",", ":"), allow_nan=False).encode()
        version = result.policy["manifest_version"]
        if asyncio.run(_publish(store, client, version, data)):
            print(f"published to {store} for manifest {version}: the service serves it at the next GET /v1/policy")
        else:
            print(f"the policy the store keeps for manifest {version} is the same: left as it is (its ETag too)")
    return 0
