"""`npcmind serve --distill-every HOURS`: retrain every client's policy in the background, so a game gets better
without a release. Training holds a core for seconds; it runs in a process of its own (spawned a client, lower
priority, its address space capped at MEMORY_LIMIT) with its own read-only store, never in the process that
answers decisions: on a thread, its Python held the loop's interpreter lock (a hostile round had raised decide's
p50 from 6 to 45 ms, and stalled it 2.5 s: issue 29). Only the finished policy comes back to the loop, to be kept
in the store that GET /v1/policy reads."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import os
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, cast

from npcmind.manifest import Manifest
from npcmind.manifest.model import ManifestFile
from npcmind.storage.base import Store, StoredPolicy, StoreError

log = logging.getLogger("npcmind.distill")

# A round on 100,000 decisions holds a core for 8-15 s here (docs/policy.md), and the SDKs ask for a new policy
# once a minute: rounds closer than 3 minutes would keep a core busy for policies no game could pick up sooner
# (1e-300 hours had logged 46,975 rounds in 10 s).
MIN_EVERY_H = 0.05
# The first round comes this soon after start, not a whole interval later: a service restarted more often than
# every HOURS (a deploy a day, --distill-every 24) had never trained at all. Not at once: start-up and the
# game's first requests come first.
FIRST_ROUND_S = 60.0


# The training process's address space (RLIMIT_AS): 100,000 decisions train in about 300 MB here
# (bench/distill_bench.py), the interpreter, numpy and scikit-learn map about 1 GB more; a round that would need
# more fails with MemoryError as that client's failure, one line of the log, and the service is not touched.
MEMORY_LIMIT = 4 * 2**30
NICE = 10  # the training process yields the cores to the one answering decisions

Trainer = Callable[[str, str, ManifestFile], tuple[bytes | None, list[str]]]


def train(store_url: str, client_id: str, file: ManifestFile) -> tuple[bytes | None, list[str]]:
    """In the training process: read the client's decisions and train (the run's lines say what happened)."""
    from npcmind.distill.run import count, distill, read_rows

    result = distill(read_rows(store_url, client_id, None), client_id, Manifest(file))
    data = json.dumps(result.policy, separators=(",", ":")).encode() if result.policy is not None else None
    summary = [
        f"{r.name} {count(r.decisions, 'decision')}, agreement {r.agreement:.1%}, "
        + ", ".join(f"{cov:.0%} covered at {th:g}" for th, cov, _ in r.table if th in (0.8, 0.9))
        for r in result.reports
    ]
    return data, summary or result.lines


def _child(conn: Connection, trainer: Trainer, args: tuple[str, str, ManifestFile]) -> None:
    """The training process: bounded, lowered, and one answer (or the error as one line) back to the service."""
    import resource

    with contextlib.suppress(OSError):
        os.nice(NICE)
    with contextlib.suppress(ValueError, OSError):  # a hard limit below ours already bounds it
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    said = _Said()
    logging.getLogger().addHandler(said)
    logging.getLogger().setLevel(logging.INFO)
    try:
        conn.send(("ok", trainer(*args), said.lines))
    except BaseException as e:  # said to the service, which logs it as this client's failure
        conn.send(("error", _said(e), said.lines))
    finally:
        conn.close()


class _Said(logging.Handler):
    """The training process's log lines, kept to be logged by the service (a spawned process has no handlers)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep one line (a round logs a few)."""
        self.lines.append((record.name, record.levelno, record.getMessage()))


def _wait(conn: Connection, proc: BaseProcess) -> tuple[bytes | None, list[str]]:
    """On a thread of the service: the training process's answer, or why there is none."""
    try:
        kind, value, lines = conn.recv()
    except EOFError:  # it ended without a word: killed (the memory limit, an operator), or crashed
        proc.join()
        raise RuntimeError(f"the training process ended with exit code {proc.exitcode} and no policy") from None
    finally:
        conn.close()
    proc.join()
    for name, level, line in lines:
        logging.getLogger(name).log(level, "%s", line)
    if kind == "error":
        raise RuntimeError(value)
    return cast(tuple[bytes | None, list[str]], value)


async def in_process(trainer: Trainer, *args: Any) -> tuple[bytes | None, list[str]]:
    """Run ``trainer`` in a process of its own and wait for it off the loop; a cancelled wait kills it."""
    ctx = multiprocessing.get_context("spawn")  # not fork: the service's loop, sockets and threads stay behind
    ours, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(theirs, trainer, args), name="npcmind-distill", daemon=True)
    proc.start()
    theirs.close()
    try:
        return await asyncio.to_thread(_wait, ours, proc)
    except BaseException:
        if proc.is_alive():
            proc.kill()
        raise


def _said(e: BaseException) -> str:
    """An error as one line of the log: what and why, no traceback a round."""
    text = " ".join(str(e).split())
    return f"{e.__class__.__name__}: {text}" if text else e.__class__.__name__


class BackgroundDistill:
    """Every ``every_h`` hours, a new policy for each client that has decisions to learn from."""

    def __init__(
        self,
        store: Store,
        store_url: str,
        manifest_of: Callable[[str], Manifest | None],
        every_h: float,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        trainer: Trainer | None = None,
    ) -> None:
        self.store = store
        self.store_url = store_url
        self.manifest_of = manifest_of
        self.every_s = every_h * 3600
        self.sleep = sleep  # the tests' clock
        self.trainer = trainer or train  # what the training process runs (the tests': one they hold)
        self.runs = 0

    async def run(self) -> None:
        """The loop the service starts; cancelled at stop."""
        await self.sleep(min(FIRST_ROUND_S, self.every_s))
        while True:
            try:
                await self.once()
            except Exception as e:  # a failed round must not end the rounds to come
                log.warning("distill: the round failed (%s); the next one tries again", _said(e))
            await self.sleep(self.every_s)

    async def once(self) -> int:
        """One round: train and keep each client's policy; how many were kept."""
        t0 = time.monotonic()
        try:
            clients = await self.store.policies.training_clients(0.0)
        except StoreError:  # said by the store's failure log
            return 0
        kept = failed = 0
        for client_id in clients:
            try:  # one client's failure is that client's: the others still get their policy
                kept += await self._client(client_id)
            except Exception as e:
                failed += 1
                log.warning("distill: %s: no new policy this round: %s", client_id, _said(e))
        self.runs += 1
        log.info(
            "distill: round done in %.1f s, %d of %d clients with a new policy%s",
            time.monotonic() - t0,
            kept,
            len(clients),
            f", {failed} failed" if failed else "",
        )
        return kept

    async def _client(self, client_id: str) -> int:
        """Train one client's policy and keep it unless it is the one kept already; 1 when a new one was kept."""
        from npcmind.distill.run import same_policy

        manifest = self.manifest_of(client_id)
        if manifest is None:  # a client no longer in the clients file
            return 0
        data, lines = await in_process(self.trainer, self.store_url, client_id, manifest.file)
        if data is None:
            log.info("distill: %s: no policy (%s)", client_id, "; ".join(lines))
            return 0
        before = await self.store.policies.get(client_id, manifest.version)
        if before is not None and same_policy(before.data, data):  # the same file keeps its ETag: no 200 for nothing
            log.info("distill: %s: the policy is unchanged (%s)", client_id, "; ".join(lines))
            return 0
        await self.store.policies.put(StoredPolicy(client_id, manifest.version, time.time(), data))
        log.info(
            "distill: %s: policy of %d bytes kept for manifest %s: %s",
            client_id,
            len(data),
            manifest.version[:19],
            "; ".join(lines),
        )
        return 1
