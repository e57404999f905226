"""The TypeScript SDK (clients/typescript): it type-checks and builds, its node tests pass against a real
service and the scripted provider, its wire types are what GET /openapi.json serves, and it decides (and
refuses a forged dialogue outcome) in headless Chromium. CI runs only pytest, so the TS checks run from here."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, Running, write_clients
from npcmind.testing.scripted import ScriptedServer

PACKAGE = ROOT / "clients" / "typescript"
NPM = shutil.which("npm")
needs_node = pytest.mark.skipif(NPM is None or shutil.which("node") is None, reason="no node/npm here (node 20+)")
pytestmark = needs_node


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """A command in the package's folder; its exit code and both outputs."""
    return subprocess.run(
        list(args), cwd=PACKAGE, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


@pytest.fixture(scope="module")
def built() -> Path:
    """`npm ci` (once: node_modules is kept between runs while the lock file is unchanged), then `npm run build`."""
    lock = PACKAGE / "package-lock.json"
    stamp = PACKAGE / "node_modules" / ".npcmind-lock"
    if not stamp.exists() or stamp.read_text() != lock.read_text():
        r = run("npm", "ci", "--no-audit", "--no-fund")
        assert r.returncode == 0, r.stdout + r.stderr
        stamp.write_text(lock.read_text())
    r = run("npm", "run", "build")
    assert r.returncode == 0, f"tsc failed:\n{r.stdout}{r.stderr}"
    return PACKAGE / "dist"


def failures(out: str) -> str:
    """The failing tests of a node --test run (TAP), with their messages, for an assertion message."""
    lines = out.splitlines()
    shown = [i for i, line in enumerate(lines) if line.lstrip().startswith("not ok")]
    return "\n".join("\n".join(lines[i : i + 25]) for i in shown[:10]) or out[-4000:]


def test_the_package_type_checks_strict(built: Path) -> None:
    r = run("npx", "tsc", "--noEmit", "-p", "tsconfig.json")
    assert r.returncode == 0, r.stdout + r.stderr
    config = json.loads((PACKAGE / "tsconfig.json").read_text())
    assert config["compilerOptions"]["strict"] is True
    package = json.loads((PACKAGE / "package.json").read_text())
    assert package["type"] == "module" and "dependencies" not in package  # ESM, no runtime dependency
    assert (built / "src" / "index.d.ts").exists() and (built / "src" / "index.js").exists()


def test_the_node_tests_pass_against_a_real_service(
    built: Path, svc: Running, scripted: ScriptedServer, start_service: Callable[..., Running], tmp_path: Path
) -> None:
    clients, keys = write_clients(tmp_path)
    with_policy = start_service(
        provider="openai", base_url=scripted.base_url, store=policy_store(tmp_path / "policy.db", "ts-policy")
    )
    hosted = start_service(
        manifest=None,
        profile="hosted",
        clients=str(clients),
        provider="openai",
        base_url=scripted.base_url,
        store=f"sqlite:///{tmp_path}/hosted.db",
    )
    env = {
        "NPCMIND_URL": svc.server.url,
        "NPCMIND_SCRIPTED_URL": scripted.url,
        "NPCMIND_HOSTED_URL": hosted.server.url,
        "NPCMIND_HOSTED_KEY": keys["game-1"],
        "NPCMIND_POLICY_URL": with_policy.server.url,
    }
    r = run("node", "--test", "--test-concurrency=1", "dist/test/", env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, failures(out)
    summary = dict(line[2:].split(" ", 1) for line in out.splitlines() if line.startswith("# ") and " " in line[2:])
    assert int(summary["fail"]) == 0 and int(summary["skipped"]) == 0 and int(summary["pass"]) >= 15, summary
    ran = [line for line in out.splitlines() if line.startswith("ok ") and " - conformance " in line]
    assert len(ran) == len(conformance_cases()), "every case of clients/conformance ran in the TS runner"


# (the text as it is in src/decide.ts, the text broken: the setter does nothing, the case that must then fail)
SETTER_BREAKS = [
    ("this.core.scope = value;", "void value;", "live scope: "),
    ("this.core.scopeState = value;", "void value;", "live scope: "),
    ("this.core.roster.threshold = value;", "void value;", "live threshold: "),
]


@pytest.mark.parametrize("right,wrong,fails", SETTER_BREAKS, ids=[b[0] for b in SETTER_BREAKS])
def test_the_live_setting_cases_fail_when_a_typescript_setter_is_ignored(
    built: Path, right: str, wrong: str, fails: str, tmp_path: Path
) -> None:
    """A runner that passed whatever the setters did would prove nothing: with one of ``DecideClient``'s setters
    doing nothing in a copy of the package, rebuilt, the conformance runner fails the case that pins it."""
    copy = tmp_path / "typescript"
    for part in ("src", "test"):
        shutil.copytree(PACKAGE / part, copy / part)
    for name in ("tsconfig.json", "package.json"):
        shutil.copy(PACKAGE / name, copy / name)
    (copy / "node_modules").symlink_to(PACKAGE / "node_modules")
    decide = copy / "src" / "decide.ts"
    text = decide.read_text()
    assert text.count(right) == 1, f"decide.ts no longer holds {right!r}: update SETTER_BREAKS"
    decide.write_text(text.replace(right, wrong))
    r = subprocess.run(["node", "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], cwd=copy,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    env = {**os.environ, "NPCMIND_CONFORMANCE": str(ROOT / "clients" / "conformance") + "/"}
    r = subprocess.run(["node", "--test", "dist/test/conformance.test.js"], cwd=copy, capture_output=True,
                       text=True, timeout=600, env=env)  # fmt: skip
    assert r.returncode != 0, "every case passed with the setter ignored"
    failed = [line for line in r.stdout.splitlines() if line.startswith("not ok ")]
    assert len(failed) == 1 and f"live-settings.json: {fails}" in failed[0], failed


def policy_store(path: Path, client_id: str) -> str:
    """A store holding a distilled policy of ``client_id`` for the forest manifest (the shared vectors' file,
    written by distill's trainer), put with the store API before the service starts on it."""
    import asyncio
    import time

    from npcmind.storage.base import StoredPolicy
    from npcmind.storage.sqlite import SqliteStore

    data = (ROOT / "clients" / "conformance" / "policy" / "forest.policy.json").read_bytes()
    version = json.loads(data)["manifest_version"]

    async def put() -> None:
        store = SqliteStore(str(path))
        await store.policies.put(StoredPolicy(client_id, version, time.time(), data))
        await store.close()

    asyncio.run(put())
    return f"sqlite:///{path}"


def conformance_cases() -> list[dict[str, Any]]:
    """Every case of clients/conformance (a file holds one case or a list of them)."""
    found: list[dict[str, Any]] = []
    for path in sorted((ROOT / "clients" / "conformance").glob("*.json")):
        data = json.loads(path.read_text())
        found += data if isinstance(data, list) else [data]
    return found


def test_the_wire_types_are_what_the_service_serves(built: Path, svc: Running, tmp_path: Path) -> None:
    """src/wire.ts is generated from GET /openapi.json by the pinned openapi-typescript; a change of the
    service's protocol that is not regenerated fails here (regenerate: the command in the message)."""
    document = tmp_path / "openapi.json"
    document.write_text(svc.http.get("/openapi.json").text)
    fresh = tmp_path / "wire.ts"
    r = run("npx", "openapi-typescript", str(document), "-o", str(fresh))
    assert r.returncode == 0, r.stdout + r.stderr
    committed = (PACKAGE / "src" / "wire.ts").read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.read_text().splitlines(True), n=1))
    assert not diff, (
        "clients/typescript/src/wire.ts differs from what GET /openapi.json serves; regenerate it: "
        "curl -s SERVICE/openapi.json > /tmp/o.json && (cd clients/typescript && npx openapi-typescript "
        f"/tmp/o.json -o src/wire.ts)\n{diff[:4000]}"
    )


# --- a real browser ------------------------------------------------------------------------------------------

PAGE_SCRIPT = """
  const m = await import("./npcmind/index.js");
  const service = "%(service)s";
  const world = {player_hp_fraction: 0.4, repellent: false};
  const client = new m.DecideClient(service, "page-1", {world, log: () => {}});
  const obs = {hp_fraction: 0.5, distance_to_player: 90, sees_player: true, current_action: "chase"};
  client.track("b1", "bee", obs, ["idle", "wander", "chase", "flee"]);
  for (let i = 0; i < 2000 && client.action("b1") === null; i++) {
    client.tick();
    await new Promise(r => setTimeout(r, 10));
  }
  const decided = client.action("b1");
  client.close();
  const npcs = new m.InMemoryNpcs();
  npcs.register("mara", "Mara, the innkeeper.");
  const cortex = {complete: () => '{"dialogue": "Welcome, traveller."}'};  // the game's own inference
  const honest = await new m.NpcMind(service, cortex, npcs).process("mara", "A traveller comes in.");
  npcs.register("forged", "A guard.");
  const forging = async (input, init) => {
    const res = await fetch(input, init);
    const body = await res.json();
    if (body.instruction && body.instruction.type === "Finalize") body.instruction.dialogue = "Open the gates.";
    return new Response(JSON.stringify(body), {status: res.status});
  };
  let refused = null;
  try { await new m.NpcMind(service, cortex, npcs, {fetch: forging}).process("forged", "Halt!"); }
  catch (e) { refused = e.name + ": " + e.message; }
  return {action: decided && decided.action, source: decided && decided.source, dialogue: honest.dialogue,
          turns: honest.state.turns, refused, forgedState: npcs.get("forged").state,
          forgedMemories: npcs.remembered("forged").length};
"""


def test_in_chromium_the_sdk_decides_and_refuses_a_forged_outcome(
    built: Path, start_service: Callable[..., Running], scripted: ScriptedServer, tmp_path: Path
) -> None:
    from test_browsers import CHROMIUM, PAGE, run_page, serve_folder

    if CHROMIUM is None:
        pytest.skip("no chromium here (apt-get install chromium)")
    site = tmp_path / "site"
    shutil.copytree(built / "src", site / "npcmind")
    pages = serve_folder(site)
    try:
        origin = PAGE.format(port=pages.server_address[1])
        running = start_service(provider="openai", base_url=scripted.base_url, model="scripted", cors_origins=[origin])
        scripted.set(choose={"b1": "flee"})
        script = PAGE_SCRIPT % {"service": running.server.url}
        body = run_page(site, f"{origin}/index.html", script, real_time=True)  # the SDK streams: real time
    finally:
        pages.shutdown()
    assert body.startswith("DONE "), body
    out = json.loads(body[5:])
    assert (out["action"], out["source"]) == ("flee", "AI"), out
    assert (out["dialogue"], out["turns"]) == ("Welcome, traveller.", 1), out
    assert out["refused"] == "SignatureError: the outcome's signature does not verify: nothing was applied", out
    assert out["forgedState"] == {} and out["forgedMemories"] == 0, out


# --- the SDK README's examples -----------------------------------------------------------------------------------

EXAMPLES = PACKAGE / "examples"


def test_the_readme_shows_the_examples_as_they_are() -> None:
    """The SDK's README shows the example files whole: the files are what the tests below run."""
    readme = (PACKAGE / "README.md").read_text()
    for name in ("web-game.html", "node-server.mjs"):
        assert (EXAMPLES / name).read_text() in readme, f"clients/typescript/README.md differs from examples/{name}"


def test_the_node_game_server_example_runs(built: Path, svc: Running, scripted: ScriptedServer) -> None:
    scripted.set(choose={"b1": "flee", "b2": "chase"})
    env = {"NPCMIND_URL": svc.server.url, "CORTEX_URL": scripted.base_url, "CORTEX_MODEL": "scripted"}
    r = run("node", "examples/node-server.mjs", env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["mara says: Well met, traveller. (turns: 1)", "b1: flee (AI)", "b2: chase (AI)"]


def test_the_web_game_example_decides_in_chromium(
    built: Path, start_service: Callable[..., Running], scripted: ScriptedServer, tmp_path: Path
) -> None:
    from cdp import Browser
    from test_browsers import CHROMIUM, PAGE, serve_folder

    if CHROMIUM is None:
        pytest.skip("no chromium here (apt-get install chromium)")
    pages = serve_folder(PACKAGE)
    try:
        origin = PAGE.format(port=pages.server_address[1])
        running = start_service(provider="openai", base_url=scripted.base_url, model="scripted", cors_origins=[origin])
        scripted.set(choose={"b1": "flee", "b2": "chase"})
        # on the wall clock: the SDK streams, and --dump-dom's virtual time runs on while a body is coming
        with Browser(tmp_path / "profile") as browser:
            browser.open(f"{origin}/examples/web-game.html?service={running.server.url}")
            browser.wait_for("document.body.dataset.result === 'answered'", 120)
            out = browser.js("document.getElementById('bees').textContent")
    finally:
        pages.shutdown()
    assert out == "b1: flee (AI)\nb2: chase (AI)", out
