"""The README and the docs show what the service really does: every code block in them is run by a test (or
says why it cannot be), the answers they show are the real ones, and their links lead somewhere."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from cdp import CHROMIUM, Browser
from conftest import ROOT, until
from docblocks import CODE, DATA, DOCS, NOT_RUN, RUN, Block, bash, blocks, run_by, started
from npcmind.http.server import free_port

README = ROOT / "README.md"
EXAMPLE = json.loads((ROOT / "examples" / "decide.json").read_text())
BIN = Path(sys.executable).parent  # the `.venv/bin/` of the blocks: the environment the tests run in


def same_but_ids_and_time(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer without what differs on every call: the latency and the decision ids."""
    out = {k: v for k, v in answer.items() if k != "latency_ms"}
    out["decisions"] = [{k: v for k, v in d.items() if k != "decision_id"} for d in answer["decisions"]]
    assert all(d["decision_id"].startswith("d_") for d in answer["decisions"] if d["source"] == "AI")
    return out


def shown_after(block: Block) -> dict[str, Any]:
    """The JSON block that follows a command: what the docs say it prints."""
    after = [b for b in blocks(block.path) if b.line > block.line]
    assert after and after[0].lang == "json", f"{block.where}: no JSON answer shown after it"
    return dict(json.loads(after[0].text))


def answers(out: str) -> list[dict[str, Any]]:
    """The decide answers a shell block printed, among the log lines of the servers it started."""
    decoder = json.JSONDecoder()  # curl ends with no newline: a server's log line may follow on the same line
    return [decoder.raw_decode(out, m.start())[0] for m in re.finditer(r'\{"a2g"', out)]


# --- every block run or marked --------------------------------------------------------------------------------


def test_every_code_block_of_the_docs_is_run_by_a_test_or_says_why_not() -> None:
    """A block a test takes its code from names that test; any other says why it is not run. A new block without
    either, or naming a test that does not exist, fails here: an example cannot slip in unrun."""
    problems = []
    for doc in DOCS:
        for b in blocks(doc):
            if b.lang in DATA:
                continue
            if b.lang not in CODE:
                problems.append(f"{b.where}: a block in {b.lang!r}: neither code this test knows nor data")
            elif m := RUN.match(b.mark):
                test_file = ROOT / "tests" / m["file"]
                if not test_file.exists() or not re.search(rf"^def {m['test']}\(", test_file.read_text(), re.M):
                    problems.append(f"{b.where}: says it is run by {m['file']}::{m['test']}, which does not exist")
            elif not NOT_RUN.match(b.mark):
                problems.append(
                    f"{b.where}: a {b.lang} block with neither <!-- run by ... --> nor <!-- not run: why -->"
                )
    assert not problems, "\n".join(problems)
    marked = [b for doc in DOCS for b in blocks(doc) if RUN.match(b.mark)]
    assert len(marked) >= 10, "the docs' examples are run, not only marked"


def test_the_readme_is_one_screen_or_two_and_its_first_section_is_see_it() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md is {len(lines)} lines: move the detail into docs/"
    assert [line for line in lines if line.startswith("## ")][:2] == ["## See it", "## Quick start"]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    """The second of Quick start's two commands is the one .ci/run runs, as written."""
    (command,) = [b for b in blocks(README) if "pytest" in b.text]
    written = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest -q"
    assert command.text.strip() == written
    assert command.text.strip() in (ROOT / ".ci" / "run").read_text()


MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    out = set()
    for heading in re.findall(r"^#+ (.+)$", doc.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_every_link_of_the_docs_leads_to_a_file_and_a_heading_there() -> None:
    """The README was split into docs/: a link to a section that moved must move with it."""
    broken = []
    for doc in [*DOCS, ROOT / "clients" / "conformance" / "README.md", ROOT / "clients" / "demo" / "README.md"]:
        text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
        for target in MD_LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            to = (doc.parent / file).resolve() if file else doc
            if not to.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}: no such file")
            elif anchor and to.suffix == ".md" and anchor not in anchors(to):
                broken.append(f"{doc.relative_to(ROOT)}: {target}: no such heading")
    assert not broken, "\n".join(broken)


# --- the Quick start's blocks, run --------------------------------------------------------------------------------


def test_the_decide_answers_in_the_readme_are_the_real_ones(start_service: Any, tmp_path: Path) -> None:
    """The curl of the service without a provider, run: it prints the answer the README shows."""
    (block,) = run_by(README, "test_the_decide_answers_in_the_readme_are_the_real_ones")
    without = start_service(provider="none")
    port = without.server.url.rsplit(":", 1)[1]
    assert bash(block.text.replace("localhost:8080", f"localhost:{port}"), ROOT, tmp_path / "out") == 0
    (printed,) = answers((tmp_path / "out").read_text())
    assert same_but_ids_and_time(printed) == same_but_ids_and_time(shown_after(block))


def test_the_scripted_block_pasted_whole_prints_the_answer(tmp_path: Path) -> None:
    """Pasted whole, the block printed nothing: its curls ran before the servers it started with `&` listened,
    and `curl -s` hid the refusal. It waits for them now; run as it is (ports and store moved), it prints the
    scripted answer the README shows, then the same request again comes from the decision cache."""
    (block,) = run_by(README, "test_the_scripted_block_pasted_whole_prints_the_answer")
    provider, service = free_port(), free_port()
    script = (
        block.text.replace(".venv/bin/", f"{BIN}/")
        .replace("9100", str(provider))
        .replace("8081", str(service))
        .replace("sqlite:///demo.db", f"sqlite:///{tmp_path}/demo.db")
    )
    decide = script.strip().splitlines()[-1]
    assert decide.startswith("curl ") and "/v1/decide" in decide
    assert bash(script + decide + "\n", ROOT, tmp_path / "out") == 0, (tmp_path / "out").read_text()[-3000:]
    out = (tmp_path / "out").read_text()
    first, again = answers(out)
    assert same_but_ids_and_time(first) == same_but_ids_and_time(shown_after(block)), out[-3000:]
    assert all(d["cached"] for d in again["decisions"])  # "The same request again is served from the decision cache"
    assert "curl: (" not in out, out[-3000:]


def test_the_scripted_block_shows_a_failure_instead_of_nothing(tmp_path: Path) -> None:
    """With nothing listening where it asks, the block says so and fails, instead of printing nothing."""
    (block,) = run_by(README, "test_the_scripted_block_pasted_whole_prints_the_answer")
    dead = free_port()
    last = block.text.strip().splitlines()[-1].replace("8081", str(dead))
    assert bash(last + "\n", ROOT, tmp_path / "out") != 0
    assert "curl: (7)" in (tmp_path / "out").read_text()  # "Failed to connect", said


def test_the_model_answer_the_docs_show_is_within_the_legal_actions() -> None:
    """docs/models.md shows a small real model's answer: test_real_model.py decides with it when it is installed."""
    real = "test_a_real_model_decides_the_example_batch_within_the_legal_actions"
    (block,) = run_by(ROOT / "docs" / "models.md", real)
    model = shown_after(block)["decisions"]
    legal = {e["id"]: e["legal_actions"] for e in EXAMPLE["entities"]}
    assert [d["source"] for d in model] == ["AI", "AI"] and all(d["action"] in legal[d["id"]] for d in model)


def test_the_protocol_doc_curls_print_what_it_shows(
    hosted: Any, start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    """docs/protocol.md's two transcripts, run: a hosted session opened with a client key, a dialogue's first step."""
    session, npc = run_by(ROOT / "docs" / "protocol.md", "test_the_protocol_doc_curls_print_what_it_shows")
    port = hosted.running.server.url.rsplit(":", 1)[1]
    script = session.text.replace("localhost:8080", f"localhost:{port}").replace("lango-5f2c91", "game-1")
    assert bash(script, ROOT, tmp_path / "session", env={"CLIENT_KEY": hosted.keys["game-1"]}) == 0
    opened, shown = json.loads((tmp_path / "session").read_text()), shown_after(session)
    assert opened.keys() == shown.keys() and opened["expires_in_s"] == shown["expires_in_s"], opened
    assert opened["session_token"].startswith("nms1.") and opened["session_id"].startswith("s_"), opened
    local = start_service(provider="openai", base_url=scripted.base_url, store=f"sqlite:///{tmp_path}/npc.db")
    port = local.server.url.rsplit(":", 1)[1]
    assert bash(npc.text.replace("localhost:8080", f"localhost:{port}"), ROOT, tmp_path / "npc") == 0
    step, shown = json.loads((tmp_path / "npc").read_text()), shown_after(npc)
    assert step["tape"].pop("stepToken") and shown["tape"].pop("stepToken")  # signed anew on every step
    assert step == shown


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")
@pytest.mark.timeout(900)
def test_the_demo_plays_the_decisions_distill_needs(tmp_path: Path) -> None:
    """distill needs 100 decisions of a type and the docs gave no way to get them: the demo, on a store that stays,
    its page playing itself, gets them; distill then writes a policy for the bees."""
    policy_md = ROOT / "docs" / "policy.md"
    demo, train = run_by(policy_md, "test_the_demo_plays_the_decisions_distill_needs")
    port, store = free_port(), tmp_path / "play.db"
    script = demo.text.replace(".venv/bin/", f"{BIN}/").replace("8084", str(port)).replace("play.db", str(store))
    page = re.search(r"`(http://127\.0\.0\.1:8084/demo\?autopilot=1[^`]*)`", policy_md.read_text())
    assert page is not None, "the docs say which page to open"
    (distill,) = [line for line in train.text.splitlines() if " distill " in line]
    assert "pip install -e '.[distill]'" in train.text  # the test extra holds it
    distill = distill.replace(".venv/bin/", f"{BIN}/").replace("play.db", str(store))
    distill = distill.replace("play.policy.json", str(tmp_path / "play.policy.json"))
    with started(script, ROOT, tmp_path / "demo.out"), Browser(tmp_path / "profile") as browser:
        until(lambda: ready(f"http://127.0.0.1:{port}/v1/health"), "the demo to listen", 120)
        browser.open(page.group(1).replace("8084", str(port)))
        tried = [0]

        def trained() -> bool:
            rows = fresh_rows(store)
            if rows < tried[0] + 8:  # a request holds up to 16 decisions: try again only when there may be more
                return False
            tried[0] = rows
            client = client_of(store)
            r = subprocess.run(["bash", "-c", distill.replace("demo-abc123", client)], capture_output=True, text=True)
            return r.returncode == 0 and (tmp_path / "play.policy.json").exists()

        until(trained, "100 fresh bee decisions in the demo's store, and a policy from them", 840)
    policy = json.loads((tmp_path / "play.policy.json").read_text())
    assert "bee" in policy["types"] and policy["client_id"].startswith("demo-"), policy["types"].keys()


def ready(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def fresh_rows(store: Path) -> int:
    """The store's rows of fresh decisions' features (one a request), read beside the running demo."""
    if not store.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        try:
            return int(db.execute("SELECT COUNT(*) FROM features").fetchone()[0])
        except sqlite3.OperationalError:  # the table is made at the store's first start
            return 0


def client_of(store: Path) -> str:
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        (client,) = db.execute("SELECT DISTINCT client_id FROM features").fetchone()
    return str(client)


# --- the SDK examples, run -------------------------------------------------------------------------------------


def test_the_decide_client_example_runs(start_service: Any, scripted: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's loop printed nothing and its first action() was None: it prints each change as it comes."""
    (block,) = run_by(README, "test_the_decide_client_example_runs")
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(choose={"bee-1": "chase"})
    namespace: dict[str, Any] = {}  # the example defines all it uses: pasted as it is, it runs
    exec(block.text.replace("http://127.0.0.1:8081", svc.server.url), namespace)  # the README's own code
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "frame   0: bee-1 = wander (native)", printed
    assert re.fullmatch(r"frame +\d+: bee-1 = chase \(AI\)", printed[-1]), printed
    assert namespace["npc"].stats.errors == 0


def test_the_sdk_readme_examples_run(start_service: Any, scripted: Any, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = run_by(ROOT / "clients" / "python" / "README.md", "test_the_sdk_readme_examples_run")
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    namespace: dict[str, Any] = {}
    exec(block.text.replace("http://127.0.0.1:8081", svc.server.url), namespace)
    assert capsys.readouterr().out == "bee-1 does wander (native)\n"
    assert namespace["npc"].stats.errors == 0
    assert namespace["action"] in ("idle", "wander", "chase", "flee")


def test_the_npc_example_runs(svc: Any, scripted: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (block,) = run_by(ROOT / "docs" / "npc.md", "test_the_npc_example_runs")
    scripted.set(text='{"dialogue": "Nobody goes to the old mine.", "action": {"type": "TALK"}}')
    code = (
        block.text.replace("http://127.0.0.1:8080", svc.server.url)
        .replace('"http://127.0.0.1:11434/v1", model="qwen3:4b"', f'"{scripted.base_url}", model="scripted"')
        .replace(".npcmind/npcs.db", str(tmp_path / "npcs.db"))
    )
    exec(code, {})  # the docs' own code
    assert "Nobody goes to the old mine." in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("npm") is None or shutil.which("node") is None, reason="no node/npm here (node 20+)")
def test_the_typescript_package_installs_from_its_tarball(start_service: Any, scripted: Any, tmp_path: Path) -> None:
    """`npm install npcmind` is a 404 (it is not on the registry): the README builds the package, packs it, and
    installs the tarball in a game's folder, and the game imports it and decides. Run here in a copy of the layout
    (the package's folder is this checkout's, the game's folder a temporary one), the tarball removed after."""
    block, loop = run_by(README, "test_the_typescript_package_installs_from_its_tarball")
    ts_readme = ROOT / "clients" / "typescript" / "README.md"
    (same,) = run_by(ts_readme, "test_the_typescript_package_installs_from_its_tarball")
    assert same.text == block.text, "the TypeScript README's install block differs from the README's"
    (tmp_path / "clients").symlink_to(ROOT / "clients")
    package = ROOT / "clients" / "typescript"
    version = json.loads((package / "package.json").read_text())["version"]
    assert f"npcmind-{version}.tgz" in block.text, "the block names the tarball npm pack writes"
    try:
        status = bash(block.text, tmp_path, tmp_path / "out", timeout=600)
    finally:
        (package / f"npcmind-{version}.tgz").unlink(missing_ok=True)
    out = (tmp_path / "out").read_text()
    assert status == 0, out[-3000:]
    assert out.rstrip().endswith("\nfunction"), out[-3000:]
    installed = tmp_path / "my-game" / "node_modules" / "npcmind"
    assert not installed.is_symlink() and (installed / "dist" / "src" / "index.js").exists()
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    scripted.set(choose={"bee-1": "chase"})
    (tmp_path / "my-game" / "bees.mjs").write_text(loop.text.replace("http://127.0.0.1:8081", svc.server.url))
    r = subprocess.run(["node", "bees.mjs"], cwd=tmp_path / "my-game", capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["bee-1 = wander (native)", "bee-1 = chase (AI)"], r.stdout + r.stderr


# `python` on a fresh machine is not the checkout's: it has no msgspec (or is not there at all)
BARE_PYTHON = re.compile(r"(?<![\w/.-])python3? (?=bench/|-m (?!venv\b|http\.server\b))")


def test_the_docs_commands_run_the_checkouts_python() -> None:
    """The performance commands said `python bench/...`, which a user's python cannot run (no msgspec): every
    command of the docs that runs the project's code names `.venv/bin/python`, as the Quick start made it."""
    bare = [
        f"{doc.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for doc in [*DOCS, ROOT / "clients" / "csharp" / "README.md"]
        for n, line in enumerate(doc.read_text().splitlines(), 1)
        if BARE_PYTHON.search(line)
    ]
    assert not bare, "\n".join(bare)
    assert ".venv/bin/python bench/decide_bench.py" in README.read_text()  # the check finds what it looks for


def test_the_streaming_doc_curl_prints_a_line_an_entity_then_the_last(
    start_service: Any, scripted: Any, tmp_path: Path
) -> None:
    """docs/streaming.md had no request a user could paste: its curl, run against the README's scripted service
    (the script the README sets), prints the lines it shows; asked again, each comes from the cache."""
    (block,) = run_by(
        ROOT / "docs" / "streaming.md", "test_the_streaming_doc_curl_prints_a_line_an_entity_then_the_last"
    )
    scripted.set(choose={"28735": "flee", "30122": "chase"})  # the README's script
    svc = start_service(provider="openai", base_url=scripted.base_url, model="scripted")
    port = svc.server.url.rsplit(":", 1)[1]
    script = block.text.replace("localhost:8081", f"localhost:{port}")

    def lines(out: Path) -> list[dict[str, Any]]:
        assert bash(script, ROOT, out) == 0, out.read_text()[-3000:]
        return [json.loads(line) for line in out.read_text().splitlines()]

    def steady(line: dict[str, Any]) -> dict[str, Any]:
        """A line without what differs on every call: the decision id, the latency and when each line went."""
        return {
            k: (sorted(v) if k == "sent_ms" else v) for k, v in line.items() if k not in ("decision_id", "latency_ms")
        }

    after = next(b for b in blocks(block.path) if b.line > block.line)
    assert after.lang == "text" and block.mark.endswith("-->"), after
    shown = [json.loads(line) for line in after.text.splitlines()]
    first = lines(tmp_path / "first")
    assert [steady(x) for x in first] == [steady(x) for x in shown], first
    assert [d["source"] for d in first[:-1]] == ["AI", "AI"] and first[-1]["a2g"] == "0.1"
    again = lines(tmp_path / "again")
    assert all(d["cached"] for d in again[:-1]) and len(again) == 3, again


# what a command of the docs writes into the folder it runs in: a report, a policy, a JSON answer kept, a store
WRITES = re.compile(r"(?:--out |> ?|sqlite:///)(?P<path>[\w.-]+\.(?:json|db))\b")


def test_what_the_docs_examples_write_in_the_checkout_git_ignores() -> None:
    """Following the docs in a clone left report.json, shadow.json and play.policy.json untracked in it: what an
    example writes where it runs is the user's output, which git ignores (the stores' lock files go on close)."""
    written = {m["path"] for doc in DOCS for m in WRITES.finditer(doc.read_text())}
    assert {"report.json", "shadow.json", "play.policy.json", "demo.db", "play.db"} <= written, written
    for lock in ("play.db.lock", "play.db-wal"):
        written.add(lock)
    r = subprocess.run(
        ["git", "check-ignore", "--no-index", "-v", *sorted(written)], cwd=ROOT, capture_output=True, text=True
    )
    ignored = {line.split("\t")[-1] for line in r.stdout.splitlines()}
    assert ignored == written, f"left in the checkout, untracked: {sorted(written - ignored)}"
