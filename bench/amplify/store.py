"""The store read back (issue 39, finding 3): what `npcmind replay` and `npcmind distill` read of rows a session
wrote, and the replay report the /replay page reads, fed hostile inputs of size n, 8n and 64n.

The rows are written straight through the storage layer, as a store written before the request edge capped scope
chains (or a crafted one) holds them: one session's decides, each carrying a chain of session scopes of 64 fields
and a scope state setting every one of them. The read-back caps (docs/replay.md, docs/policy.md) skip such a row
and count it, so the cost of a run is what it costs to look at the row's size, not to read it.

Also: `python bench/amplify/store.py [--decides 2100] [--fields 19840]`: replay and distill on a clean store and on
the hostile one of the same number of decides, each in its own process (CPU seconds and peak RSS), and their
ratios (target: at most 2x each).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "clients" / "python" / "src"), str(ROOT / "bench")]

import msgspec  # noqa: E402

from amplify.core import Cost, Feed, Surface, in_process  # noqa: E402
from decide_bench import wait_up  # noqa: E402
from npcmind.decide.read import Read, ReadCall, ReadEntity, encode_read  # noqa: E402
from npcmind.http.server import free_port  # noqa: E402
from npcmind.manifest import Manifest, load  # noqa: E402
from npcmind.manifest.model import FieldSpec, ScopeSpec  # noqa: E402
from npcmind.protocol.a2g import DecideEntity  # noqa: E402
from npcmind.storage import base, open_store  # noqa: E402
from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures  # noqa: E402

FOREST = ROOT / "examples" / "forest.yaml"
MAX_SCOPE_FIELDS = getattr(base, "MAX_SCOPE_FIELDS", 256)  # the caps, as the store states them (a store of
MAX_ROW_BYTES = getattr(base, "MAX_ROW_BYTES", 256 * 1024)  # before had none: the harness measures it as well)
BEES = ["idle", "wander", "chase", "flee"]
SCOPE_FIELDS = 64  # a scope declares at most this many fields (the manifest's bound)


def chain(fields: int) -> tuple[str | None, dict[str, ScopeSpec], dict[str, Any] | None]:
    """A chain of session scopes declaring ``fields`` boolean fields in all (64 a scope), and a state setting each:
    the active scope, the session's scopes along the chain, the scope state."""
    if fields <= 0:
        return None, {}, None
    extra: dict[str, ScopeSpec] = {}
    state: dict[str, Any] = {}
    for i in range((fields + SCOPE_FIELDS - 1) // SCOPE_FIELDS):
        names = [f"s{i}_f{j}" for j in range(min(SCOPE_FIELDS, fields - i * SCOPE_FIELDS))]
        spec = {n: FieldSpec("boolean") for n in names}
        extra[f"s{i}"] = ScopeSpec(f"cave {i}", f"s{i - 1}" if i else None, spec)
        state.update({n: (i + j) % 2 == 0 for j, n in enumerate(names)})
    return f"s{len(extra) - 1}", extra, state


def _bee(rng: random.Random) -> tuple[dict[str, Any], str, list[str]]:
    obs = {"hp_fraction": round(rng.random(), 2), "distance_to_player": float(rng.randrange(30) * 10),
           "sees_player": rng.random() < 0.8, "current_action": rng.choice(BEES)}  # fmt: skip
    action = "flee" if obs["hp_fraction"] < 0.3 else ("chase" if obs["sees_player"] else "wander")
    return obs, action, BEES


async def _fill(
    url: str, decides: int, fields: int, read_fields: int | None, client: str, session: str, seed: int
) -> None:
    manifest = load(FOREST)
    rng = random.Random(seed)
    scope, extra, state = chain(fields)
    if read_fields is not None:  # a chain declared in what the model read alone, the state as the row's
        scope, extra, _ = chain(read_fields)
    world = {"player_hp_fraction": 0.5, "repellent": False}
    store = open_store(url)
    await store.open()
    kept_manifest: bytes | None = msgspec.json.encode(manifest.data)
    for _ in range(decides):
        seq = await store.decisions.allocate(1)
        obs, action, legal = _bee(rng)
        issued = IssuedDecision(seq, f"d{seq}", session, "b1", "bee", action, action, 1000.0 + seq)
        entity = DecideEntity("b1", "bee", obs, legal)
        call = ReadCall("enum", scope, extra, [], world, state, [], [ReadEntity(1, entity, [], [])])
        read = encode_read(Read(call, [(seq, 1)]))
        learned = [DecisionFeatures(seq, "bee", None, obs, None, legal, action, 0.9)]
        features = RequestFeatures(client, manifest.version, 1000.0 + seq, world, state, learned, read, kept_manifest)
        await store.decisions.record([issued], features)
        kept_manifest = None
    await store.close()


def fill(
    store: Path | str,
    decides: int,
    fields: int = 0,
    client: str = "game-1",
    session: str = "s",
    seed: int = 1,
    read_fields: int | None = None,
) -> None:
    """Write ``decides`` one-bee decides of one session through the storage layer (a SQLite file, or a store's URL),
    each with what the model read (for replay) and a chain of session scopes declaring ``fields`` fields, all set
    (0: no scope; ``read_fields``: a chain declaring that many in what the model read alone)."""
    url = store if isinstance(store, str) else f"sqlite:///{store}"
    asyncio.run(_fill(url, decides, fields, read_fields, client, session, seed))


def manifest() -> Manifest:
    """The manifest the rows were written with."""
    return load(FOREST)


# --- the surfaces ------------------------------------------------------------------------------------------------

ROW_CAP = f"{MAX_SCOPE_FIELDS} scope fields, {MAX_ROW_BYTES // 1024} KiB a row read back: skipped, counted past it"
ROWS = 8  # decides of the store a surface reads (each replayed, or read, in full)


def _store_of(made: dict[int, Path], fields: int) -> Path:
    if fields not in made:
        folder = Path(tempfile.mkdtemp(prefix="npcmind-amplify-store-"))
        fill(folder / "s.db", ROWS, fields)
        made[fields] = folder / "s.db"
    return made[fields]


def _replay_in_process(db: Path) -> str:
    """Load the kept calls and render each as `npcmind replay --policy` does (no policy: nothing is chosen)."""
    from npcmind.replay.kept import load as load_kept
    from npcmind.replay.main import _renderable
    from npcmind.replay.run import PolicyTarget, replay_all

    async def go() -> str:
        store = open_store(f"sqlite:///{db}", read_only=True)
        await store.open()
        try:
            loaded = await load_kept(store, "game-1", 0.0, None, None)
        finally:
            await store.close()
        calls, left = _renderable(loaded)
        target = PolicyTarget(dict.fromkeys(loaded.manifests))
        done = await replay_all(calls, target, 1e9, 8, lambda r: None)
        skipped = sum(n for why, n in left.items() if why.startswith("rows skipped"))
        return f"{skipped} skipped, {sum(len(r.decisions) for r in done)} replayed; {left}"

    return asyncio.run(go())


def _distill_in_process(db: Path) -> str:
    """Read the rows as `npcmind distill` does, and the features a type would get from them."""
    from npcmind.distill.features import candidate_features
    from npcmind.distill.run import read_rows

    rows = read_rows(f"sqlite:///{db}", "game-1", None)
    features = candidate_features("bee", rows, manifest())
    skipped = getattr(rows, "skipped", {})
    return f"{sum(skipped.values())} skipped, {len(rows)} read, {len(features)} features; {dict(skipped)}"


def _store_surface(run: Callable[[Path], str]) -> Callable[[], AbstractContextManager[Feed]]:
    @contextlib.contextmanager
    def start() -> Iterator[Feed]:
        made: dict[int, Path] = {}
        run(_store_of(made, 1))  # what the run imports is not the input's cost

        def feed(n: int) -> Cost:
            db = _store_of(made, n)
            cost = in_process(lambda: run(db))
            return Cost(cost.seconds, cost.bytes, not cost.note.startswith("'0 skipped"), cost.note)

        try:
            yield feed
        finally:
            for db in made.values():
                shutil.rmtree(db.parent, ignore_errors=True)

    return start


# The /replay page's own script, run by Node on a report with the few DOM calls it makes stubbed: its status, and
# the CPU and heap the report cost it (parse and show), as JSON on stdout.
PAGE_RUNNER = r"""
"use strict";
const fs = require("fs");
const html = fs.readFileSync(process.argv[2], "utf8");
const script = html.slice(html.indexOf("<script>") + 8, html.lastIndexOf("</script>"));
function element() {
  return {
    children: [], cells: [], dataset: {}, hidden: false, textContent: "", className: "",
    classList: { add() {}, remove() {} }, files: [],
    replaceChildren() { this.children = []; },
    appendChild(c) { this.children.push(c); return c; },
    insertRow() { const r = element(); this.children.push(r); return r; },
    insertCell() { const c = element(); this.cells.push(c); return c; },
    createTHead() { const h = element(); this.children.push(h); return h; },
    createTBody() { const b = element(); this.children.push(b); return b; },
    addEventListener() {},
  };
}
const els = {};
globalThis.document = { getElementById: (id) => (els[id] ??= element()), createElement: () => element() };
const page = new Function(script + "\nreturn { show, open };")();
const text = fs.readFileSync(process.argv[3], "utf8");
const heap0 = process.memoryUsage().heapUsed;
const cpu0 = process.cpuUsage();
const done = () => {
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(JSON.stringify({ status: els.status.textContent, state: els.status.dataset.state,
    seconds: (cpu.user + cpu.system) / 1e6, heap: process.memoryUsage().heapUsed - heap0 }) + "\n");
};
page.open({ name: "report.json", size: Buffer.byteLength(text), text: () => Promise.resolve(text) });
setImmediate(done);
"""
PAGE = ROOT / "src" / "npcmind" / "http" / "replay.html"


def show_report(report: Any, folder: Path) -> dict[str, Any]:
    """The /replay page's script (in Node) fed this report, as a person opens it: its status and what it cost."""
    runner, path = folder / "page.js", folder / "report.json"
    runner.write_text(PAGE_RUNNER)
    path.write_bytes(report if isinstance(report, bytes) else json.dumps(report).encode())
    out = subprocess.run(["node", str(runner), str(PAGE), str(path)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the page threw: {out.stderr.strip().splitlines()[:6]}")
    said: dict[str, Any] = json.loads(out.stdout)
    return said


def report_of(types: int, differ: int = 20, actions: int = 4) -> dict[str, Any]:
    """A replay report as `npcmind replay` writes it, of ``types`` types and ``differ`` situations shown."""
    names = [f"a{i}" for i in range(actions)]
    confusion = {a: {b: 1 for b in names} for a in names}
    tally = {"decisions": actions * actions, "agreed": actions, "agreement": 0.25, "failed": 0, "failed_changed": 0,
             "failed_changed_share": None, "prompts_changed": 0, "fallbacks": 0, "confusion": confusion}  # fmt: skip
    shown = {"type": "t0", "decisions": 2, "differ": 1, "prompt_before": "E1 b1 …", "prompt_after": "E1 b1 …",
             "decided": {"a0": 2}, "replayed": {"a0": 1, "a1": 1}}  # fmt: skip
    return {
        "format": "npcmind-replay-report",
        "target": {"kind": "policy", "client": "game-1", "store": "sqlite:///s.db"},
        "calls": 1, "decisions": types * actions * actions, "left_out": {}, "agreement": 0.25,
        "types": {f"t{i}": tally for i in range(types)},
        "tokens": {"in": 0, "out": 0}, "cost": None, "latency_ms": {"p50": None, "p99": None, "calls": 0},
        "fallbacks": {}, "situations_differing": differ, "differ": [shown] * differ,
    }  # fmt: skip


def _page_surface(make: Callable[[int], Any]) -> Callable[[], AbstractContextManager[Feed]]:
    @contextlib.contextmanager
    def start() -> Iterator[Feed]:
        folder = Path(tempfile.mkdtemp(prefix="npcmind-amplify-page-"))

        def feed(n: int) -> Cost:
            said = show_report(make(n), folder)
            return Cost(said["seconds"], max(0, said["heap"]), said["state"] == "error", said["status"][:110])

        try:
            yield feed
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    return start


def _crafted(n: int) -> dict[str, Any]:
    """A report of n situations shown, the last with a string where its number of differences is."""
    r = report_of(4, differ=n)
    r["differ"] = [*r["differ"][:-1], {**r["differ"][-1], "differ": "many"}]
    return r


SURFACES: list[Surface] = [
    Surface("npcmind replay, store rows of a chain of n scope fields", "fields", 24, ROW_CAP,
            _store_surface(_replay_in_process), cap_at=MAX_SCOPE_FIELDS),
    Surface("npcmind distill, store rows of a chain of n scope fields", "fields", 24, ROW_CAP,
            _store_surface(_distill_in_process), cap_at=MAX_SCOPE_FIELDS),
    Surface("GET /replay page, a replay report of n types", "types", 30,
            "256 types, 256 actions, 100 situations, 131,072 cells, 16 MiB a report", _page_surface(report_of),
            cap_at=256),
    Surface("GET /replay page, a crafted report (n situations, a string where a number is)", "situations", 10,
            "a field of the wrong kind is one line naming it", _page_surface(_crafted), cap_at=0),
]  # fmt: skip


_LAUNCHER = (  # forks the measured process from a bare interpreter, which reports its usage on the last line
    "import os, sys\npid = os.fork()\nif pid == 0:\n    os.execv(sys.argv[1], sys.argv[1:])\n"
    "_, status, ru = os.wait4(pid, 0)\nsys.stdout.flush()\n"
    "print(f'\\nUSAGE {ru.ru_utime + ru.ru_stime} {ru.ru_maxrss} {os.waitstatus_to_exitcode(status)}', flush=True)"
)


def _spawned(cmd: list[str], env: dict[str, str]) -> tuple[float, int, int, bytes]:
    """Run a process to its end and read its own usage: CPU seconds, peak RSS, exit code, output. Forked by a bare
    interpreter (python -I -S), not by this process: a child's peak RSS starts at its parent's (Linux keeps the
    mark across fork and exec), and this one holds far more than the few MB of the launcher."""
    with tempfile.TemporaryFile() as out:
        launch = [sys.executable, "-I", "-S", "-c", _LAUNCHER, *cmd]
        subprocess.run(launch, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, check=False)
        out.seek(0)
        text = out.read()
    body, _, last = text.rstrip().rpartition(b"\nUSAGE ")
    sec, kb, code = last.split()
    return float(sec), int(kb) * 1024, int(code), body


def _cli(*args: str) -> tuple[float, int, int, str]:
    """`npcmind ARGS` in its own process: CPU seconds, peak RSS, exit code and its last lines."""
    sec, peak, code, out = _spawned([sys.executable, "-m", "npcmind.cli", *args], {"PYTHONPATH": _path()})
    lines = [x for x in out.decode(errors="replace").splitlines() if x.strip() and not x.startswith(("[", "replay: "))]
    lines = [x.split(" npcmind.storage: ")[-1] for x in lines]  # a log line: its message
    return sec, peak, code, " | ".join(lines[-2:])[:160]


def _path() -> str:
    return os.pathsep.join(sys.path[:3])


def main() -> int:
    """`npcmind replay` and `npcmind distill` as a user runs them on a clean and a hostile store of the same number
    of decides, each in its own process: CPU seconds, peak RSS, and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--decides", type=int, default=2100)
    ap.add_argument("--fields", type=int, default=19840)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="npcmind-store-hostile-"))
    try:
        stores = {"clean": tmp / "clean.db", "hostile": tmp / "hostile.db"}
        for db, fields in ((stores["clean"], 0), (stores["hostile"], args.fields)):  # apart: this process stays small
            code = f"import amplify.store as s, pathlib; s.fill(pathlib.Path({str(db)!r}), {args.decides}, {fields})"
            _spawned([sys.executable, "-c", code], {"PYTHONPATH": _path()})
        sizes = ", ".join(f"{k} {p.stat().st_size / 1e6:.1f} MB" for k, p in stores.items())
        print(f"stores: {args.decides:,} decides each, the hostile one's {args.fields:,} scope fields a row ({sizes})")
        ran: dict[tuple[str, str], tuple[float, int, int, str]] = {}
        fast = ("--rate", "100000", "--in-flight", "8", "--out", str(tmp / "r.json"))
        port = free_port()
        cmd = [sys.executable, "-m", "npcmind.cli", "scripted-provider", "--port", str(port)]
        env = {**os.environ, "PYTHONPATH": _path()}
        model = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            wait_up(f"http://127.0.0.1:{port}/_requests", model)
            for name, db in stores.items():
                common = ("--store", f"sqlite:///{db}", "--client", "game-1")
                ran["distill", name] = _cli("distill", *common, "--manifest", str(FOREST), "--publish")
                ran["replay --policy", name] = _cli("replay", *common, "--policy", *fast)
                target = ("--provider", "openai", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "scripted")
                ran["replay --provider", name] = _cli("replay", *common, *target, *fast)
        finally:
            model.terminate()
            model.wait()
        for what in ("replay --provider", "replay --policy", "distill"):
            for name in stores:
                sec, peak, code, said = ran[what, name]
                print(f"{what} {name}: {sec:6.2f} s CPU, peak {peak / 1e6:6.0f} MB, exit {code}: {said}")
            (cs, cm, _, _), (hs, hm, _, _) = ran[what, "clean"], ran[what, "hostile"]
            print(f"{what} hostile / clean: time {hs / cs:.2f}x, memory {hm / cm:.2f}x (target: at most 2x each)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
