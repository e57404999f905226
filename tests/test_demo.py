"""`npcmind demo`: the forest example as a browser game, played in headless Chromium against the real command.

The command runs in its own process (as a user runs it) on a free port; the page is driven over the DevTools
protocol (tests/cdp.py). Every wait is for a condition with a generous deadline, never a duration: the game's
own clock runs faster with `?speed=` so a long game takes less time on a fast machine, never more assertions.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cdp import CHROMIUM, Browser
from conftest import ROOT, bee, decide_body, queen, until
from npcmind.demo import DEMO_RULES
from npcmind.http.app import demo_asset as asset
from npcmind.http.server import free_port

needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")
SNAPSHOT = "JSON.stringify(window.npcmindDemo.snapshot())"
DEMO_PNG = ROOT / "docs" / "demo.png"
DEMO_WEBP = ROOT / "docs" / "demo.webp"  # the README's recording: bench/demo_record.py
# what the page of what the model saw shows of each entity: its part of the prompt (a row's tooltip, cached
# entities too) and the request's own part as sent
SEEN_TEXT = (
    "[...document.querySelectorAll('#entities tr')].map(r => r.title).join('\\n') + "
    "document.getElementById('user').textContent"
)


class Demo:
    """`npcmind demo ARGS` in its own process, until stopped; its address once it said it is ready."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")} | (env or {})  # no key given
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "npcmind.cli", "demo", "--port", str(self.port), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"
        until(
            lambda: any("/demo in a browser" in line for line in self.lines) or self.proc.poll() is not None,
            "ready",
            60,
        )
        assert self.proc.poll() is None, "".join(self.lines)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


@pytest.fixture()
def play(tmp_path: Path) -> Iterator[Callable[..., tuple[Demo, Browser]]]:
    """Start the command with some arguments and open its page (with a query) in a fresh Chromium."""
    opened: list[tuple[Demo, Browser]] = []

    def start(*args: str, query: str = "", env: dict[str, str] | None = None) -> tuple[Demo, Browser]:
        demo = Demo(*args, env=env)
        browser = Browser(tmp_path / f"profile{len(opened)}")
        opened.append((demo, browser))
        browser.open(f"{demo.url}/demo{query}")
        browser.wait_for("window.npcmindDemo !== undefined")
        return demo, browser

    yield start
    for demo, browser in opened:
        browser.close()
        demo.stop()


def snapshot(browser: Browser) -> dict[str, Any]:
    return dict(json.loads(browser.js(SNAPSHOT)))


def deciders(s: dict[str, Any]) -> list[dict[str, Any]]:
    """Every character that decides: the bees, the queen and the swarms that have bees."""
    return [*s["bees"], s["queen"], *[w for w in s["swarms"] if w["code"] != "no bees"]]


# --- the bundle ------------------------------------------------------------------------------------------


def sources_digest(files: list[str]) -> str:
    """What clients/demo/build.mjs records: each source's repository path and SHA-256, in path order."""
    h = hashlib.sha256()
    for f in files:
        text = (ROOT / f).read_bytes().replace(b"\r\n", b"\n")
        h.update(f"{f}\n{hashlib.sha256(text).hexdigest()}\n".encode())
    return h.hexdigest()


def test_the_committed_bundle_is_built_from_the_current_sources() -> None:
    """A change to the game's sources without `npm run build` in clients/demo would ship an old game."""
    header = asset("demo.js").split(b"\n", 1)[0].decode()
    m = re.fullmatch(r"/\* npcmind-demo-sources (\{.*\}) \*/", header)
    assert m, header
    built = json.loads(m.group(1))
    sources = {str(p.relative_to(ROOT)) for p in (ROOT / "clients" / "demo" / "src").rglob("*.ts")}
    assert sources <= set(built["files"]), f"sources the bundle was not built from: {sources - set(built['files'])}"
    assert built["sha256"] == sources_digest(built["files"]), "the bundle is older than its sources: npm run build"
    assert asset("index.html") == (ROOT / "clients" / "demo" / "index.html").read_bytes()
    shipped = (ROOT / "src" / "npcmind" / "demo" / "forest.yaml").read_text()
    assert shipped == (ROOT / "examples" / "forest.yaml").read_text(), "the packaged manifest is the example's"


DEMO_PACKAGE = ROOT / "clients" / "demo"
needs_node = pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None, reason="no node/npm")


@needs_node
def test_the_game_type_checks_strict_and_the_committed_bundle_is_what_the_build_makes(tmp_path: Path) -> None:
    """CI runs only pytest: the TypeScript checks run from here (`npm ci` once per lock file)."""

    def run(*args: str) -> str:
        r = subprocess.run(list(args), cwd=DEMO_PACKAGE, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    lock, stamp = DEMO_PACKAGE / "package-lock.json", DEMO_PACKAGE / "node_modules" / ".npcmind-lock"
    if not stamp.exists() or stamp.read_text() != lock.read_text():
        run("npm", "ci", "--no-audit", "--no-fund")
        stamp.write_text(lock.read_text())
    assert json.loads((DEMO_PACKAGE / "tsconfig.json").read_text())["compilerOptions"]["strict"] is True
    package = json.loads((DEMO_PACKAGE / "package.json").read_text())
    assert "dependencies" not in package and set(package["devDependencies"]) == {"typescript", "esbuild"}
    run("npx", "tsc", "--noEmit", "-p", "tsconfig.json")
    run("node", "build.mjs", str(tmp_path))
    assert (tmp_path / "demo.js").read_bytes() == asset("demo.js"), "the committed bundle is not the build's"


@pytest.mark.fast
def test_the_page_and_its_script_are_served_from_the_service(svc: Any) -> None:
    page = svc.http.get("/demo")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script src="/demo/demo.js">' in page.text
    assert "script-src" not in page.headers["content-security-policy"]  # scripts from this origin only
    script = svc.http.get("/demo/demo.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")


def test_the_demo_refuses_two_providers_at_once() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "npcmind.cli", "demo", "--scripted", "--base-url", "http://127.0.0.1:9/v1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "--scripted is the provider" in r.stderr, r.stderr


# --- the scripted rules --------------------------------------------------------------------------------------


def test_the_scripted_rules_choose_by_the_situation(svc: Any, scripted: Any) -> None:
    """--scripted answers by what each entity's part of the prompt shows, not by its id."""
    scripted.set(when=DEMO_RULES)
    obs = {"hp_fraction": 1.0, "distance_to_player": 80, "sees_player": True, "current_action": "idle"}
    body = decide_body(
        {"id": "swarm-a", "type": "swarm", "observation": {"size": 5}, "legal_actions": ["surround", "retreat"]},
        {"id": "swarm-b", "type": "swarm", "observation": {"size": 1}, "legal_actions": ["surround", "retreat"]},
        bee("sees", observation=obs),
        bee("hurt", observation={**obs, "hp_fraction": 0.2}),
        bee("far", observation={**obs, "sees_player": False, "distance_to_player": 400}),
        queen("strong", observation={**obs, "hp_fraction": 0.8}),
        queen("weak", observation={**obs, "hp_fraction": 0.45}),
    )
    r = svc.decide(body)
    assert r.status_code == 200, r.text
    chosen = {d["id"]: (d["source"], d.get("action")) for d in r.json()["decisions"]}
    assert chosen == {
        "swarm-a": ("AI", "surround"),
        "swarm-b": ("AI", "retreat"),
        "sees": ("AI", "chase"),
        "hurt": ("AI", "flee"),
        "far": ("AI", "idle"),
        "strong": ("AI", "chase"),
        "weak": ("AI", "flee"),
    }


def test_a_rule_that_is_no_regular_expression_is_refused_by_name(scripted: Any) -> None:
    r = httpx.put(f"{scripted.url}/_script", json={"when": [{"match": "(", "choose": "flee"}]})
    assert r.status_code == 422
    assert r.json()["error"]["details"][0]["path"] == "when[0]" and "not a regular expression" in r.text


# --- in a browser --------------------------------------------------------------------------------------------

# the snapshot, the legend (each source's word and count) and the mode line, read in one evaluation: the page
# writes them in the same frame, so what they say can be compared
STATE = """JSON.stringify({
  s: window.npcmindDemo.snapshot(),
  legend: Object.fromEntries([...document.querySelectorAll('#legend li')].map(li => [li.dataset.source, {
    word: li.querySelector('.word').textContent, count: Number(li.querySelector('.count').textContent),
    colour: getComputedStyle(li.querySelector('.swatch')).backgroundColor}])),
  mode: document.getElementById('mode').textContent})"""
# the page at its size: the scrolling element's sizes, and every element drawn outside the window
FIT = """JSON.stringify((() => {
  const e = document.scrollingElement;
  const out = [...document.querySelectorAll('body *')].filter(x => x.getClientRects().length).filter(x => {
    const r = x.getBoundingClientRect();
    return r.left < 0 || r.top < 0 || r.right > innerWidth || r.bottom > innerHeight;
  }).map(x => x.id || x.className || x.tagName);
  return {size: [innerWidth, innerHeight], scroll: [e.scrollWidth, e.scrollHeight],
    client: [e.clientWidth, e.clientHeight], out};
})())"""
# the pixels of a plot drawn in a colour ("rgb(r, g, b)", as the legend's swatch has it)
PAINTED = """((id, rgb) => {
  const c = document.getElementById(id), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const [r, g, b] = rgb.match(/\\d+/g).map(Number);
  let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] === r && d[i + 1] === g && d[i + 2] === b && d[i + 3] === 255) n++;
  return n;
})"""
SOURCES = ("AI", "cached", "local", "native")


def state(browser: Browser) -> dict[str, Any]:
    """The page's snapshot with its legend and mode line, as one frame wrote them (so they can be compared)."""
    return dict(json.loads(browser.js(STATE)))


def characters(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The characters drawn on the field (the swarms have no body): the bees and the queen."""
    return [*s["bees"], s["queen"]]


def assert_words_match(st: dict[str, Any]) -> None:
    """The legend counts the characters as drawn, and the mode line says what they run."""
    chars = characters(st["s"])
    assert {k: v["count"] for k, v in st["legend"].items()} == {
        k: sum(c["source"] == k for c in chars) for k in SOURCES
    }
    if st["s"]["mode"] in ("down", "none"):
        held = sum(c["source"] != "native" for c in chars)
        said = (
            f"{held} of {len(chars)} characters still act on earlier decisions"
            if held
            else "every character runs its native AI"
        )
        assert said in st["mode"], (said, st["mode"])


def assert_labels_apart(s: dict[str, Any]) -> None:
    """No label covers another, every label lies whole inside the field, none is a bee's unless pointed at."""
    labels, field = s["labels"], s["field"]
    for i, a in enumerate(labels):
        inside = 0 <= a["x"] <= field["width"] - a["w"] and 0 <= a["y"] <= field["height"] - a["h"]
        assert inside, a
        for b in labels[i + 1 :]:
            apart = (
                a["x"] + a["w"] <= b["x"]
                or b["x"] + b["w"] <= a["x"]
                or a["y"] + a["h"] <= b["y"]
                or b["y"] + b["h"] <= a["y"]
            )
            assert apart, (a, b)


def assert_fits(browser: Browser) -> None:
    """At 1280x720 the page has no scrollbar and nothing of it lies outside the window."""
    fit = json.loads(browser.js(FIT))
    assert fit["size"] == [1280, 720], fit
    assert fit["scroll"] == fit["client"] == [1280, 720] and fit["out"] == [], fit


@needs_browser
@pytest.mark.timeout(900)  # it plays half a minute of wall time for the plot: on a loaded machine, longer
def test_with_the_scripted_provider_every_bee_decides_through_npcmind(play: Any, tmp_path: Path) -> None:
    demo, browser = play("--scripted", query="?autopilot=1")
    s = until(
        lambda: (s := snapshot(browser)) and all(d["source"] in ("AI", "cached") for d in deciders(s)) and s,
        "every bee, the queen and the swarms show an AI action",
        90,
    )
    until(lambda: snapshot(browser)["mode"] == "scripted", "the page names the provider", 90)  # polled: 1 s

    # the SDK streams by default (docs/streaming.md): decisions came as lines, each with its own time to arrive
    def streamed() -> dict[str, Any] | None:
        x = snapshot(browser)
        timed = all(d["ms"] is not None and d["ms"] >= 0 for d in deciders(x) if d["source"] in ("AI", "cached"))
        return x if x["stats"]["streamedDecisions"] > 0 and timed else None

    streamed_s = until(streamed, "decisions that came as lines, each with the time its line took", 60)
    assert streamed_s["stats"]["streamsCut"] == 0, streamed_s["stats"]
    ai_label = r"bee \S+ · (idle|wander|chase|flee) · (scripted|cache) · in \d+ ms"
    until(
        lambda: (p := pointed(browser)) and any(re.fullmatch(ai_label, x["text"]) for x in p["labels"]),
        "the bee pointed at shows when its decision came",
        60,
    )
    browser.point(0, 0)  # off the field: the labels below are the field's own
    assert "scripted, not a model" in browser.js("document.getElementById('mode').textContent")

    def counted() -> dict[str, int]:  # the counters' tiles, as a person reads them
        tiles = (
            "[...document.querySelectorAll('#stats [data-k]')]"
            ".map(t => [t.dataset.k, t.querySelector('.value').textContent])"
        )
        return {k: int(v) for k, v in browser.js(tiles) if k in ("requests", "decisions", "tokens")}

    until(lambda: len(c := counted()) == 3 and all(c.values()), "the counters count requests, decisions, tokens", 90)
    assert browser.js("document.getElementById('seen').getAttribute('href')") == f"/?client_id={s['clientId']}"
    assert browser.errors == []  # loaded and played with no console error
    assert not [line for line in demo.lines if "WARNING" in line], demo.lines  # its own page is allowed
    # the plot gets points as decisions arrive, drawn in the legend's colour of the scripted provider's
    until(
        lambda: any(p["rates"]["AI"] > 0 for p in snapshot(browser)["plot"]),
        "a point of decisions from the provider",
        90,
    )
    st = state(browser)
    assert st["legend"]["AI"]["word"] == "scripted" and st["legend"]["native"]["word"] == "native AI"
    until(
        lambda: browser.js(f"{PAINTED}('plot-decisions', {json.dumps(st['legend']['AI']['colour'])})") > 20,
        "the plot drawn",
        30,
    )
    until(lambda: any(p["tokensIn"] > 0 for p in snapshot(browser)["plot"]), "a point of tokens", 90)
    assert_fits(browser)
    assert_words_match(st)
    assert_labels_apart(st["s"])
    texts = [label["text"] for label in st["s"]["labels"]]
    assert not [t for t in texts if t.startswith("bee ")] and any(t.startswith("queen · ") for t in texts), texts

    # a screenshot at the page's size after the plot's half minute (the README's recording and still are
    # bench/demo_record.py's: docs/demo.md). Where the bees are is the game's business: no fight is waited for
    s = until(lambda: (s := snapshot(browser)) and len(s["plot"]) >= 30 and s, "the plot's half minute")
    assert_labels_apart(s)
    shot = tmp_path / "demo.png"
    browser.screenshot(shot)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and (int.from_bytes(png[16:20]), int.from_bytes(png[20:24])) == (1280, 720)


# a label is drawn at most its placer's three rings out from its thing (clients/demo/src/labels.ts: the thing's
# radius, 4 px, then a label height and a gap a ring), the third ring at its radius + 4 + 2 * (16 + 3); a diagonal
# place puts the box's nearest corner that far along both axes, so sqrt(2) times it from the thing's centre (a test
# that allowed the third ring's distance along one axis only failed on a ring-2 diagonal: 103 px for 92). Kept
# inside the canvas, a box only comes nearer.
LABEL_RING = 4 + 2 * (16 + 3)
EDGE = 10  # px: a character this close to the field's border is against it
PINNED_S = 3  # game seconds against a border, or longer: pinned there (a corner is against two borders)
needs_learning = pytest.mark.skipif(
    importlib.util.find_spec("sklearn") is None, reason="the demo learns with the distill extra (scikit-learn)"
)


def assert_labels_on_their_things(s: dict[str, Any]) -> None:
    """Each label lies beside what it names: its box's nearest point at most the placer's last ring from the thing's
    disc along each axis."""
    for a in s["labels"]:
        at = a["at"]
        nx, ny = max(a["x"], min(at["x"], a["x"] + a["w"])), max(a["y"], min(at["y"], a["y"] + a["h"]))
        assert math.dist((nx, ny), (at["x"], at["y"])) <= math.sqrt(2) * (at["r"] + LABEL_RING) + 0.01, a


class Borders:
    """How long (in game seconds) each character has been against the field's border, over the snapshots seen."""

    def __init__(self) -> None:
        self.since: dict[str, float] = {}  # id: game time it came against a border, while it stays there
        self.longest: tuple[float, str] = (0.0, "")

    def see(self, s: dict[str, Any]) -> None:
        w, h = s["field"]["width"], s["field"]["height"]
        against = {c["id"] for c in characters(s) if min(c["x"], w - c["x"]) <= EDGE or min(c["y"], h - c["y"]) <= EDGE}
        self.since = {i: self.since.get(i, s["time"]) for i in against}
        for i, t in self.since.items():
            self.longest = max(self.longest, (s["time"] - t, i))


@needs_browser
@needs_learning
@pytest.mark.timeout(900)  # about a minute of play; a loaded machine plays slower, never more assertions
def test_on_autopilot_every_source_shows_within_a_minute_of_game_time_with_no_input(play: Any) -> None:
    """Issue 40: open the page, touch nothing. Within the game's first minute the viewer sees the scripted
    stand-in decide (and the page says it is no model), the cache answer the scene at rest, and native AI when
    the tour cuts the model with the page's control; the policy the demo learns as it plays takes over once
    learnt (see below), and the tour restores the model. All along, labels stay beside their things, no
    character is pinned against the field's border, and the page fits 1280x720. The minute is the page's game
    time (the tour's clock): a slower machine plays it later, never faster."""
    demo, browser = play("--scripted")  # the command's defaults: autopilot, a policy learned every 10 s
    borders, cut_seen, published, sampled = Borders(), [], [], 0  # published: game time the page saw a policy

    def through_the_tour() -> dict[str, Any] | None:
        nonlocal sampled
        st = state(browser)
        s = st["s"]
        sampled += 1
        borders.see(s)
        assert_labels_apart(s)
        assert_labels_on_their_things(s)
        if sampled % 10 == 0:  # every leg's words, the model cut or not: the panel still fits
            assert_fits(browser)
        if s["service"]["cut"]:
            cut_seen.append(st)
        if s["service"]["policy"] is not None and not published:
            published.append(s["time"])
        restored = cut_seen and not s["service"]["cut"]
        return st if len(s["firsts"]) == 4 and restored else None

    st = until(through_the_tour, "every source counted, and the model cut and restored", 600)
    s = st["s"]
    assert s["autopilot"] and s["speed"] == 1 and s["sent"]["events"] > 0, s  # no key was pressed
    firsts = s["firsts"]
    print(f"first seen (game s): {json.dumps({k: round(v, 1) for k, v in firsts.items()})}")  # the figures
    assert set(firsts) == set(SOURCES) and all(firsts[k] <= 60 for k in ("AI", "cached", "native")), firsts
    # the policy is the one source whose time is not the tour's: it waits for 100 bee decisions, a round of learning
    # (a process of its own at a low priority) and a tree sure enough of what the bees see: 33-44 s in most runs
    # on this project's 2-core machine, 58-65 and 131 s in others with builds beside them (docs/demo.md). A bound
    # on it would be a bound on the machine. It must come, with no input, and the SDK must use it once published
    assert firsts["local"] >= published[0] - 2, (firsts, published)  # learnt while the demo plays, then taken
    # the scripted stand-in is said as such, by the legend and the mode line (the line follows the service's state at
    # the page's next look: a run read it cut while the state read a moment later said restored)
    assert st["legend"]["AI"]["word"] == "scripted", st
    until(lambda: "scripted, not a model" in state(browser)["mode"], "the mode line says the scripted stand-in", 30)
    assert st["legend"]["local"]["word"] == "policy" and s["policy"], s  # the SDK uses the published policy
    assert s["service"]["policy"] is not None and s["service"]["learnEvery"] == 10, s["service"]
    # the native AI came with the cut: the tour's leg, and the page's button saying it restores the model
    cut = cut_seen[0]
    assert cut["s"]["leg"] == "cut" and firsts["native"] >= min(c["s"]["time"] for c in cut_seen) - 1, firsts
    assert any(c["s"]["counted"]["native"] > 0 for c in cut_seen)
    until(lambda: browser.js("document.getElementById('cut').textContent") == "Cut the model", "restored", 30)
    assert sampled > 100 and borders.longest[0] < PINNED_S, borders.longest
    assert_fits(browser)
    assert browser.errors == []
    assert not [line for line in demo.lines if "WARNING" in line], demo.lines


@needs_browser
def test_when_the_service_stops_the_bees_go_on_under_native_ai_and_the_page_says_so(play: Any) -> None:
    demo, browser = play("--scripted")
    until(lambda: all(d["source"] == "AI" for d in deciders(snapshot(browser))), "AI actions first", 90)
    demo.stop()
    seen: list[dict[str, Any]] = []  # every state read while the bees' decisions run out: each must be told right

    def all_native() -> dict[str, Any] | None:
        st = state(browser)
        seen.append(st)
        s = st["s"]
        return st if s["mode"] == "down" and all(b["source"] == "native" for b in s["bees"]) else None

    st = until(all_native, "every bee on its native AI, and the page saying the service is down", 60)
    for each in seen:
        assert_words_match(each)
    assert "not answering" in st["mode"]
    s = st["s"]
    assert all(b["code"] == "unreachable" for b in s["bees"] if b["code"] is not None)
    before = {b["id"]: (b["x"], b["y"]) for b in s["bees"]}
    until(
        lambda: any((b["x"], b["y"]) != before.get(b["id"]) for b in snapshot(browser)["bees"]),
        "the bees still move",
        90,
    )
    # the decisions that did not come are counted as native AI's, the plot draws them in its colour
    until(lambda: any(p["rates"]["native"] > 0 for p in snapshot(browser)["plot"]), "a point of native AI", 90)
    colour = json.dumps(st["legend"]["native"]["colour"])
    until(lambda: browser.js(f"{PAINTED}('plot-decisions', {colour})") > 20, "native AI drawn in the plot", 30)
    assert_fits(browser)  # the longer words fit too


@needs_browser
def test_with_no_provider_every_bee_runs_its_native_ai_and_the_page_says_how_to_turn_a_model_on(play: Any) -> None:
    _, browser = play("--provider", "none")
    s = until(
        lambda: (s := snapshot(browser)) and all(b["code"] == "unavailable" for b in s["bees"]) and s,
        "every bee told its fallback",
        90,
    )
    assert all(d["source"] == "native" for d in deciders(s))
    until(lambda: snapshot(browser)["mode"] == "none", "the page says there is no provider", 90)  # polled: 1 s
    st = state(browser)
    assert "native AI" in st["mode"] and "OPENAI_API_KEY=sk-... npcmind demo" in st["mode"], st["mode"]
    assert_words_match(st)
    assert st["legend"]["AI"]["word"] == "model"
    assert_fits(browser)
    assert browser.errors == []


@needs_browser
def test_the_keyboard_moves_the_player(play: Any) -> None:
    _, browser = play("--provider", "none")
    start = snapshot(browser)["player"]
    for code, axis, sign in [("ArrowRight", "x", 1), ("KeyS", "y", 1), ("ArrowLeft", "x", -1), ("KeyW", "y", -1)]:
        at = snapshot(browser)["player"][axis]
        browser.key(code, down=True)
        try:
            moved = lambda axis=axis, at=at, sign=sign: (snapshot(browser)["player"][axis] - at) * sign > 30  # noqa: E731
            until(moved, f"{code} moves the player", 30)
        finally:
            browser.key(code, down=False)
    assert snapshot(browser)["player"] != start


def pointed(browser: Browser) -> dict[str, Any] | None:
    """The mouse on the first bee where it is now; the snapshot once its label is drawn."""
    field = "JSON.stringify(document.getElementById('field').getBoundingClientRect())"
    s, r = snapshot(browser), json.loads(browser.js(field))
    b = s["bees"][0]
    browser.point(
        r["left"] + b["x"] * r["width"] / s["field"]["width"],
        r["top"] + b["y"] * r["height"] / s["field"]["height"],
    )
    s = snapshot(browser)
    return s if [x for x in s["labels"] if x["text"].startswith(f"bee {b['id']} · ")] else None


@needs_browser
def test_pointing_at_a_bee_labels_it_beside_the_others(play: Any) -> None:
    """Bees carry no text (their colour says where their action came from): the one pointed at gets a label
    with its action, placed clear of every other label."""
    _, browser = play("--provider", "none")
    s = until(lambda: pointed(browser), "a label for the bee pointed at", 60)
    label = next(x for x in s["labels"] if x["text"].startswith("bee "))
    assert re.fullmatch(r"bee \S+ · (idle|wander|chase|flee) · native AI( \(\w+\))?", label["text"]), label
    assert_labels_apart(s)


@needs_browser
def test_a_two_minute_game_sends_events_and_reports_and_the_model_sees_their_outcomes(
    play: Any, tmp_path: Path
) -> None:
    """Two minutes of game time (at ?speed=8, with the player on autopilot): hits, deaths and stings go back
    to npcmind as events and reports, and the page of what the model saw shows them in the bees' memory."""
    demo, browser = play("--scripted", query="?speed=8&autopilot=1")
    labels_seen: list[dict[str, Any]] = []

    def two_minutes() -> dict[str, Any] | None:  # the labels of every frame read on the way stay apart
        s = snapshot(browser)
        labels_seen.append(s)
        return s if s["time"] >= 120 else None

    s = until(two_minutes, "two minutes of game time", 300)
    assert s["sent"]["events"] > 0 and s["stats"]["reportsSent"] > 0 and s["stats"]["errors"] == 0, s
    assert browser.errors == []
    for each in labels_seen:
        assert_labels_apart(each)
        assert_labels_on_their_things(each)
    # the page the demo links to, in a second browser while the game goes on (it shows the newest request)
    with Browser(tmp_path / "seen") as seen:
        seen.open(demo.url + browser.js("document.getElementById('seen').getAttribute('href')"))
        outcome = r'" bee\n(?:  .*\n)*?  memory: .*?-> (done|failed|interrupted) "'  # in a bee's own part
        until(
            lambda: re.search(outcome, seen.js(SEEN_TEXT)),
            "an outcome in a bee's memory on the page of what the model saw",
            120,
        )


def test_the_readme_shows_it_first() -> None:
    """A newcomer's first section: one command, one URL, the recording bench/demo_record.py makes (docs/demo.md)."""
    readme = (ROOT / "README.md").read_text()
    first = readme.split("\n## ", 2)[1]
    assert first.startswith("See it\n"), first[:40]
    assert "npcmind demo --scripted\n```" in first and "http://127.0.0.1:8080/demo" in first
    assert "[distill]" in first  # the learned policy is one of what the page shows: its extra is installed
    assert "](docs/demo.webp)" in first and "](docs/demo.png)" in first and "](docs/demo.md)" in first
    # an animated WebP (RIFF, its VP8X header's animation flag, an ANIM chunk) under 2 MB
    webp = DEMO_WEBP.read_bytes()
    assert webp[:4] == b"RIFF" and webp[8:16] == b"WEBPVP8X" and webp[20] & 0x02 and b"ANIM" in webp[:64]
    assert len(webp) < 2 * 1024 * 1024, f"{len(webp):,} bytes"
    # the still at exactly the page's size: the PNG header's width and height
    png = DEMO_PNG.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and (int.from_bytes(png[16:20]), int.from_bytes(png[20:24])) == (1280, 720)
