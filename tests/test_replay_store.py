"""What distill and replay read back of a store is capped (issue 39, finding 3): a row past a cap is skipped and
counted, and told to the user, never read whole; on both backends. The hostile rows are written straight through
the storage layer (bench/amplify/store.py), as a store kept from before the request edge capped scope chains, or a
crafted one, holds them."""

from __future__ import annotations

import json
import random
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest
import zstandard

from amplify.store import chain, fill, report_of, show_report
from conftest import FOREST, cli
from npcmind.storage import base
from stores import opened, run

FIELDS_SKIPPED = "more than 2,048 fields"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's URL of each kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/s.db"
    return str(request.getfixturevalue("postgres_url"))


def _training(url: str) -> Any:
    async def read() -> Any:
        s = await opened(url)
        try:
            return await s.policies.training("game-1", 0.0)
        finally:
            await s.close()

    return run(read)


def _loaded(url: str) -> Any:
    from npcmind.replay.kept import load

    async def read() -> Any:
        s = await opened(url)
        try:
            return await load(s, "game-1", 0.0, None, None)
        finally:
            await s.close()

    return run(read)


def test_rows_past_the_field_cap_are_skipped_counted_and_their_reads_never_fetched(store_url: str) -> None:
    """One session's decides with a chain of 19,840 scope fields (the issue's store: replay 45.6 s / 4.37 GB on
    2,100 of them, clean 3.9 s / 67 MB) beside an honest session's: distill reads the honest rows and counts the
    others, replay leaves their calls out, by why, without fetching what the model read for them."""
    fill(store_url, 30, 0, session="honest")
    fill(store_url, 12, 19_840, session="hostile", seed=2)
    rows = _training(store_url)
    assert len(rows) == 30 and {r.session_id for r in rows} == {"honest"}
    assert dict(rows.skipped) == {FIELDS_SKIPPED: 12} and len(rows.skipped_firsts) == 12 and not rows.stopped
    assert rows.said() == [f"12 rows skipped: {FIELDS_SKIPPED}"]

    async def reads() -> list[tuple[int, bytes | None]]:
        s = await opened(store_url)
        try:
            return await s.policies.reads("game-1", 0.0, None, None, rows.skipped_firsts)
        finally:
            await s.close()

    got = run(reads)
    assert [first for first, blob in got if blob is None] == sorted(rows.skipped_firsts)  # never fetched
    assert sum(blob is not None for _, blob in got) == 30
    loaded = _loaded(store_url)
    assert len(loaded.calls) == 30 and dict(loaded.left_out) == {f"rows skipped: {FIELDS_SKIPPED}": 12}
    from npcmind.distill.run import distill

    assert distill(rows, "game-1").lines[0] == f"12 rows skipped: {FIELDS_SKIPPED}"


def test_a_row_at_the_fields_a_decide_may_carry_is_read_and_one_past_them_is_not(tmp_path: Path) -> None:
    """A row is read back within what the request edge lets a decide carry: 256 scope fields (a chain's bound) are
    read, 257 are not; nor is an observation of 65 fields (a manifest declares at most 64)."""
    url = f"sqlite:///{tmp_path}/s.db"
    fill(url, 1, 256, session="a")
    fill(url, 1, 257, session="b", seed=2)
    from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures

    async def write() -> None:
        s = await opened(url)
        seq = await s.decisions.allocate(1)
        obs = {f"f{i}": 1 for i in range(65)}
        d = DecisionFeatures(seq, "bee", None, obs, None, ["idle"], "idle", 0.9)
        issued = IssuedDecision(seq, f"d{seq}", "c", "b", "bee", "idle", "idle", 1000.0)
        await s.decisions.record([issued], RequestFeatures("game-1", "sha256:m", 1000.0, {}, None, [d]))
        await s.close()

    run(write)
    rows = _training(url)
    assert [r.session_id for r in rows] == ["a"] and len(rows[0].scope_state or {}) == 256
    assert dict(rows.skipped) == {
        "more than 256 scope fields": 1,
        "a world or an observation of more than 64 fields": 1,
    }


def test_a_row_is_decompressed_no_further_than_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A features row that inflates to 16 MiB is refused naming the cap after at most the cap and a chunk; the
    issue's row (19,840 fields, 317 KB) after at most 3 chunks (96 KiB), as soon as it holds more keys than the
    field cap; a blob the store did not hand over (None: stored past its cap) is refused unread."""
    produced: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self) -> None:
            self.d = real()

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self.d.decompress(data, max_length)
            produced.append(len(out))
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self.d, name)

    monkeypatch.setattr(base.zlib, "decompressobj", Counting)
    bomb = zlib.compress(b"[" + b"0," * (8 << 20) + b"0]", 9)
    with pytest.raises(base.RowTooLarge, match=r"^more than 262,144 bytes$"):
        base.inflate(bomb, base.MAX_ROW_BYTES)
    assert sum(produced) <= base.MAX_ROW_BYTES + base.CHUNK, sum(produced)
    produced.clear()
    _, _, state = chain(19_840)
    row = zlib.compress(json.dumps(["sha256:m", {}, state, []]).encode(), 1)
    with pytest.raises(base.RowTooLarge, match=f"^{FIELDS_SKIPPED}$"):
        base.inflate(row, base.MAX_ROW_BYTES)
    assert sum(produced) <= 3 * base.CHUNK < len(zlib.decompress(row)) / 3, sum(produced)
    with pytest.raises(base.RowTooLarge, match=r"^more than 524,288 bytes$"):
        base.inflate(None, base.MAX_READ_BYTES)


def test_a_row_past_its_bytes_cap_is_skipped_and_one_stored_past_it_is_not_even_handed_over(store_url: str) -> None:
    """A world of 300,000 characters (compressible: stored small, 300 KB read back) and one of 600,000 random ones
    (stored past the cap): both skipped, named by the cap; the honest row beside them is read."""
    from npcmind.storage.base import DecisionFeatures, IssuedDecision, RequestFeatures

    rng = random.Random(7)
    worlds = [{"x": "a" * 300_000}, {"x": "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=600_000))}]

    async def write() -> None:
        s = await opened(store_url)
        for world in [{"player_hp_fraction": 0.5}, *worlds]:
            seq = await s.decisions.allocate(1)
            d = DecisionFeatures(seq, "bee", None, {"hp_fraction": 0.5}, None, ["idle"], "idle", 0.9)
            issued = IssuedDecision(seq, f"d{seq}", "s", "b", "bee", "idle", "idle", 1000.0)
            await s.decisions.record([issued], RequestFeatures("game-1", "sha256:m", 1000.0, world, None, [d]))
        await s.close()

    run(write)
    rows = _training(store_url)
    assert len(rows) == 1 and dict(rows.skipped) == {"more than 262,144 bytes": 2}


def test_a_kept_read_past_its_caps_is_left_out_by_name(tmp_path: Path) -> None:
    """What the model read is capped apart from the features row beside it: a read whose session scopes declare
    3,000 fields (a chain the service refuses to decide on today), or that inflates past 512 KiB, is left out by
    name, its features row read; the other calls are replayed."""
    url = f"sqlite:///{tmp_path}/s.db"
    fill(url, 4, 0, session="ok")
    fill(url, 2, 0, session="declares", seed=2, read_fields=3_000)
    fill(url, 2, 0, session="large", seed=3, read_fields=24_000)
    loaded = _loaded(url)
    assert len(loaded.calls) == 4
    assert dict(loaded.left_out) == {
        "rows skipped: a chain of session scopes past 16 scopes or 256 fields": 2,
        "rows skipped: more than 524,288 bytes": 2,
    }


def test_a_run_stops_reading_at_the_decisions_it_may_read(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_RUN_DECISIONS (1,000,000; 10 here) bounds what one run holds; the user is told it stopped, and why."""
    monkeypatch.setattr(base, "MAX_RUN_DECISIONS", 10)
    fill(store_url, 25, 0)
    rows = _training(store_url)
    assert len(rows) == 10 and rows.stopped and not rows.skipped
    assert rows.said() == ["stopped reading at 10 decisions (the most one run reads): --since reads fewer"]


def test_distill_and_replay_tell_the_user_how_many_rows_they_skipped_and_why(tmp_path: Path) -> None:
    """As a user runs them on a store of only hostile rows: one line each, no traceback, no policy."""
    db = tmp_path / "s.db"
    fill(db, 6, 19_840)
    store = ("--store", f"sqlite:///{db}", "--client", "game-1")
    r = cli("distill", *store, "--out", str(tmp_path / "p.json"), "--manifest", str(FOREST))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert f"6 rows skipped: {FIELDS_SKIPPED}" in r.stdout.splitlines(), r.stdout
    r = cli("replay", *store, "--policy", "--out", str(tmp_path / "r.json"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"(left out: 6 rows skipped: {FIELDS_SKIPPED})" in r.stderr, r.stderr


# --- the /replay page reads a report (issue 39, 7c) ------------------------------------------------------------

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="no node here")


def _set(report: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out: Any = json.loads(json.dumps(report))
    *parents, last = path.replace("[", ".").replace("]", "").split(".")
    at = out
    for p in parents:
        at = at[int(p)] if isinstance(at, list) else at[p]
    if isinstance(at, list):
        at[int(last)] = value
    else:
        at[last] = value
    return dict(out)


@needs_node
@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        ("cost", {"in": 0, "out": 0, "total": "0.5"}, "`cost.total` must be a number, not a string"),
        ("agreement", "high", "`agreement` must be a number or null, not a string"),
        ("tokens", [1, 2], "`tokens` must be an object, not a list"),
        ("latency_ms.p50", "fast", "`latency_ms.p50` must be a number or null, not a string"),
        ("types.t0.agreement", "0.5", "`types.t0.agreement` must be a number or null, not a string"),
        ("types.t0.confusion.a0.a1", "1", "`types.t0.confusion.a0.a1` must be a number, not a string"),
        ("fallbacks", {"unavailable": None}, "`fallbacks.unavailable` must be a number, not null"),
        ("differ[1].decided", "chase", "`differ[1].decided` must be an object, not a string"),
        ("differ[0].prompt_before", 7, "`differ[0].prompt_before` must be text or null, not a number"),
        ("differ", {}, "`differ` must be a list, not an object"),
    ],
)  # fmt: skip
def test_a_report_field_of_the_wrong_kind_is_one_line_naming_it(
    path: str, value: Any, said: str, tmp_path: Path
) -> None:
    """A crafted report with a string where a number is had stopped the page with a TypeError halfway (the facts
    written, the tables not); the page's own script (run by Node, the DOM stubbed) now says which field is wrong."""
    shown = show_report(_set(report_of(2, differ=3), path, value), tmp_path)
    assert shown == {**shown, "state": "error", "status": f"This report cannot be shown: {said}."}, shown
    assert show_report(report_of(2, differ=3), tmp_path)["state"] == "shown"


@needs_node
def test_a_report_holding_more_than_the_page_shows_is_refused_naming_the_bound(tmp_path: Path) -> None:
    """What one report can make the page build is bounded: types, situations, the confusion tables' cells and the
    file's bytes; each past its bound is one line naming it, before anything is built."""
    cases = [
        (report_of(257), "`types` holds 257 entries: at most 256"),
        (report_of(2, differ=101), "`differ` holds 101 situations: at most 100"),
        (report_of(200, actions=40), "the confusion tables hold more than 131072 cells"),
    ]
    for report, said in cases:
        assert show_report(report, tmp_path)["status"] == f"This report cannot be shown: {said}.", said
    assert show_report(report_of(256), tmp_path)["state"] == "shown"
    big = json.dumps(report_of(2)).encode() + b" " * (16 * 1024 * 1024)
    shown = show_report(big, tmp_path)
    assert shown["state"] == "error" and shown["status"].endswith("a report is at most 16777216, not read."), shown


def test_the_page_names_its_bounds_as_docs_replay_md_states_them() -> None:
    """The bounds the page reads a report within are the ones docs/replay.md states."""
    page = (Path(base.__file__).parents[1] / "http" / "replay.html").read_text()
    assert "MAX_REPORT_BYTES = 16 * 1024 * 1024, MAX_ENTRIES = 256, MAX_DIFFER = 100, MAX_CELLS = 131072" in page
    doc = (Path(__file__).parents[1] / "docs" / "replay.md").read_text()
    for said in ("16 MiB", "256 types", "100 situations", "131,072 cells"):
        assert said in doc, said


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None, reason="no chromium")
def test_the_page_in_chromium_names_the_wrong_field_of_a_crafted_report(shared_svc: Any, tmp_path: Path) -> None:
    """GET /replay in Chromium, the crafted report of the issue chosen as a person chooses it: one line naming the
    field, the report's tables not shown, no error in the page."""
    from cdp import Browser

    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(_set(report_of(2), "cost", {"in": 0, "out": 0, "total": "0.5"})))
    with Browser(tmp_path / "profile") as browser:
        browser.open(shared_svc.server.url + "/replay")
        root = browser.call("DOM.getDocument")["root"]["nodeId"]
        node = browser.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
        browser.call("DOM.setFileInputFiles", nodeId=node, files=[str(crafted)])
        browser.wait_for("document.getElementById('status').dataset.state === 'error'", deadline_s=60)
        said = browser.js("document.getElementById('status').textContent")
        assert said == "This report cannot be shown: `cost.total` must be a number, not a string.", said
        assert browser.js("document.getElementById('report').hidden") is True
        assert not browser.errors, browser.errors


def test_a_zstd_row_is_read_no_further_than_its_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows are kept as zstd (small_compress), read as far as zlib rows: a 16 MiB one refused after at most the cap
    and a chunk, the issue's row of 19,840 fields after at most 3 chunks; a cut or damaged frame, or one without its
    size, is a damaged row (ValueError); a zlib row kept before still reads."""
    text = json.dumps(["sha256:m", {"a": 1}, None, []]).encode()
    assert base.inflate(base.small_compress(text), base.MAX_ROW_BYTES) == text
    assert base.inflate(zlib.compress(text, 1), base.MAX_ROW_BYTES) == text  # a row kept before
    for damaged in (
        base.small_compress(text)[:-6],  # cut
        base.small_compress(text)[:-1] + b"\x00",  # its checksum wrong
        zstandard.ZstdCompressor(write_content_size=False).compress(text),
    ):
        with pytest.raises(ValueError) as e:
            base.inflate(damaged, base.MAX_ROW_BYTES)
        assert not isinstance(e.value, base.RowTooLarge)

    produced: list[int] = []
    real = zstandard.ZstdDecompressor

    class Counting:
        def stream_reader(self, data: bytes) -> Any:
            reader = real().stream_reader(data)

            class Read:
                def __enter__(self) -> Any:
                    return self

                def __exit__(self, *exc: object) -> None:
                    reader.close()

                def read(self, n: int) -> bytes:
                    out: bytes = reader.read(n)
                    produced.append(len(out))
                    return out

            return Read()

    monkeypatch.setattr(base.zstandard, "ZstdDecompressor", Counting)
    bomb = base.small_compress(b"[" + b"0," * (8 << 20) + b"0]")
    with pytest.raises(base.RowTooLarge, match=r"^more than 262,144 bytes$"):
        base.inflate(bomb, base.MAX_ROW_BYTES)
    assert sum(produced) <= base.MAX_ROW_BYTES + base.CHUNK, sum(produced)
    produced.clear()
    _, _, state = chain(19_840)
    row = base.small_compress(json.dumps(["sha256:m", {}, state, []]).encode())
    with pytest.raises(base.RowTooLarge, match=f"^{FIELDS_SKIPPED}$"):
        base.inflate(row, base.MAX_ROW_BYTES)
    assert 0 < sum(produced) <= 3 * base.CHUNK, sum(produced)
