"""The Unreal Engine plugin (clients/unreal): its engine-agnostic core, NpcMindCore, is built here with CMake under
g++ and clang++ (C++17, no exceptions, no RTTI, every warning an error, as Unreal builds) and its doctest runner
must pass every shared conformance case, policy vector and signature vector. Unreal's own build (UnrealBuildTool)
is not available here: the NpcMind module is compiled against stand-ins of the engine types it touches."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Running
from games import kept_the_protocol, played
from npcmind.testing.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "clients" / "unreal"
CONFORMANCE = ROOT / "clients" / "conformance"
BUILD = PLUGIN / "build"
TOOLS = ("cmake", "make", "g++", "clang++")


def _header(name: str) -> bool:
    """Whether a development header is installed (Debian puts some under the architecture's folder)."""
    folders = [Path("/usr/include"), Path("/usr/local/include"), *Path("/usr/include").glob("*-linux-gnu")]
    return any((d / name).exists() for d in folders)


missing = [t for t in TOOLS if shutil.which(t) is None] + [
    pkg for pkg, header in (("doctest-dev", "doctest/doctest.h"), ("libssl-dev", "openssl/evp.h"),
                            ("libcurl4-openssl-dev", "curl/curl.h")) if not _header(header)
]  # fmt: skip
pytestmark = [
    pytest.mark.skipif(
        bool(missing), reason=f"no {', '.join(missing)} here (Debian: cmake clang doctest-dev libcurl4-openssl-dev)"
    ),
    # the first test builds the plugin from clean with both compilers (the module's fixture): minutes on a loaded
    # 2-core machine, past the suite's 120 s a test; every step has a timeout of its own below
    pytest.mark.timeout(1800),
]
COMPILERS = {"gcc": "g++", "clang": "clang++"}


def build(name: str) -> Path:
    """Configure (once) and build the plugin's CMake project with one compiler, two jobs; its build folder."""
    out = BUILD / name
    if not (out / "CMakeCache.txt").exists():
        r = subprocess.run(
            ["cmake", "-S", str(PLUGIN), "-B", str(out), f"-DCMAKE_CXX_COMPILER={COMPILERS[name]}"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    r = subprocess.run(["cmake", "--build", str(out), "-j2"], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, f"{COMPILERS[name]}: " + (r.stdout[-6000:] + r.stderr[-6000:])
    return out


@pytest.fixture(scope="module")
def builds() -> dict[str, Path]:
    """Both compilers' build folders (kept between runs: make rebuilds only what changed)."""
    return {name: build(name) for name in COMPILERS}


def run_tests(folder: Path) -> str:
    """The doctest runner's output; it must have passed."""
    r = subprocess.run([str(folder / "npcmind_tests")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-8000:] + r.stderr[-2000:]
    return r.stdout


def counted(output: str, what: str) -> int:
    found = re.search(rf"^{what}: (\d+) (?:cases )?run", output, re.M)
    assert found is not None, f"the runner did not say how many {what} it ran:\n{output[-2000:]}"
    return int(found[1])


def conformance_count() -> int:
    total = 0
    for path in CONFORMANCE.glob("*.json"):
        data = json.loads(path.read_text())
        total += len(data) if isinstance(data, list) else 1
    return total


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_every_shared_case_and_vector_passes_in_cpp(builds: dict[str, Path], compiler: str) -> None:
    """The same files the Python, TypeScript and C# runners read: every case ran (a runner that silently read fewer
    would still be green) and none failed; the policy vectors and refused policy files too."""
    out = run_tests(builds[compiler])
    assert re.search(r"^conformance: (\d+) cases run, 0 failed$", out, re.M), out[-3000:]
    assert counted(out, "conformance") == conformance_count()
    blocks = json.loads((CONFORMANCE / "policy" / "cases.json").read_text())
    assert counted(out, "policy vectors") == sum(len(b["cases"]) for b in blocks)
    assert counted(out, "refused vectors") == len(json.loads((CONFORMANCE / "policy" / "refused.json").read_text()))
    assert re.search(r"test cases:\s+\d+ \|\s+\d+ passed \| 0 failed", out), out[-2000:]


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_the_unreal_module_compiles_against_the_engine_stand_ins(builds: dict[str, Path], compiler: str) -> None:
    """Source/NpcMind (the subsystem, the FHttpModule transport, the settings, the async dialogue node) compiled,
    not linked, against Tests/Engine's stand-ins of the engine types it touches: every source gave its object."""
    sources = sorted(p.name for p in (PLUGIN / "Source" / "NpcMind" / "Private").glob("*.cpp"))
    objects = builds[compiler] / "CMakeFiles" / "npcmind_unreal_module.dir" / "Source" / "NpcMind" / "Private"
    assert sources and sorted(p.name for p in objects.glob("*.o")) == [f"{s}.o" for s in sources]
    for header in (PLUGIN / "Source" / "NpcMind" / "Public").glob("*.h"):
        if "UCLASS" in header.read_text():
            stand_in = PLUGIN / "Tests" / "Engine" / f"{header.stem}.generated.h"
            assert stand_in.exists(), f"{header.name}: no stand-in of its generated header"


def test_the_readme_shows_the_actor_it_compiles() -> None:
    """The README's Actor is the file the stand-in build compiles, as it is."""
    readme = (PLUGIN / "README.md").read_text()
    shown = re.findall(r"<!-- not run: [^>]*\(the file (\S+)\)[^>]*-->\n```cpp\n(.*?)```", readme, re.S)
    assert [name for name, _ in shown] == ["Examples/Actor/BeeActor.cpp"]
    assert shown[0][1] == (PLUGIN / shown[0][0]).read_text()
    assert "UnrealBuildTool does not build this plugin" in readme


# --- the cases fail when the C++ core is broken on purpose -----------------------------------------------------

# (file, the text as it is, the text broken, what must then fail)
BREAKS = [
    ("Scheduler.cpp", "if (answer.Epoch != roster_->Epoch || s.Epoch != roster_->Epoch) {",
     "if (answer.Epoch < -1) {", "conformance epoch-old-answer-dropped.json: "),
    ("Roster.cpp", "        if (!Contains(legal, d.Action)) {", "        if (legal.empty()) {",
     "conformance illegal-action-never-used.json: "),
    ("Roster.cpp", "if (now >= e->Current->ExpiresAt) {", "if (now < 0) {", "conformance expiry.json: "),
    ("Outbox.cpp", "if (status == 413 && items.size() > 1) {", "if (status == 999) {", "conformance telemetry.json: "),
    ("Roster.cpp", "if (!(got->Confidence >= Threshold)", "if (!(got->Confidence >= 0.8)",
     "conformance live-settings.json: live threshold: "),
    ("Scheduler.cpp", "if (Scope) {", "if (Scope && Epoch() < 0) {", "conformance live-settings.json: live scope: "),
    ("Jcs.cpp", "return a.first < b.first;", "return a.first > b.first;", "SigningTests.cpp"),
]  # fmt: skip


@pytest.mark.parametrize("file,right,wrong,fails", BREAKS, ids=[f"{b[0]}: {b[2]}" for b in BREAKS])
def test_the_shared_cases_fail_when_the_cpp_core_is_broken_on_purpose(
    builds: dict[str, Path], file: str, right: str, wrong: str, fails: str, tmp_path: Path
) -> None:
    """A runner that passed whatever the scheduler did would prove nothing: with one rule broken in a copy of the
    file, recompiled and linked with the g++ build's other objects, the runner fails the case that pins it."""
    source = PLUGIN / "Source" / "NpcMindCore" / "Private" / file
    text = source.read_text()
    assert text.count(right) == 1, f"{file} no longer holds {right!r}: update BREAKS"
    broken = tmp_path / file
    broken.write_text(text.replace(right, wrong))
    objects = builds["gcc"] / "CMakeFiles"
    others = [o for o in objects.glob("npcmind_core.dir/**/*.o") if o.name != f"{file}.o"]
    tests = sorted(objects.glob("npcmind_tests.dir/**/*.o"))
    flags = ["-std=c++17", "-fno-exceptions", "-fno-rtti", "-O1", f"-I{PLUGIN / 'Source/NpcMindCore/Public'}",
             "-isystem", str(PLUGIN / "ThirdParty/rapidjson/include")]  # fmt: skip
    exe = tmp_path / "broken_tests"
    r = subprocess.run(
        ["g++", *flags, str(broken), *map(str, others), *map(str, tests), "-lcrypto", "-o", str(exe)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0, "every test passed with the rule broken"
    assert fails in r.stdout, r.stdout[-4000:]


# --- a C++ game against a real service ------------------------------------------------------------------------


def test_a_cpp_game_of_20_drones_at_60_hz_keeps_the_protocol_through_faults_and_a_stopped_service(
    builds: dict[str, Path], scripted: ScriptedServer, tmp_path: Path
) -> None:
    """The console game (Examples/Console/Game.cpp over libcurl, as the plugin's FHttpModule transport) on a
    manifest of its own: decisions from the model while the provider answers, read from the streamed answer as its
    lines come; the game's native AI (never an AI decision asked after the fault began) while the provider fails
    and after the service stopped; and in every phase no illegal action, no decision of an older epoch (it raises
    its epoch every 2 s), none past its expiry. Its Tick() times are printed (docs/bench.md), not asserted."""
    kept_the_protocol(played([str(builds["clang"] / "npcmind_game")], scripted, tmp_path))


# --- dialogue NPCs: the step machine against a real service ----------------------------------------------------


def dialogue(builds: dict[str, Path], *args: str) -> dict[str, Any]:
    """Examples/Console/Dialogue.cpp run with these arguments: its JSON line."""
    r = subprocess.run([str(builds["gcc"] / "npcmind_dialogue"), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-4000:]
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def test_a_cpp_dialogue_turn_is_verified_through_openssl_and_applied_by_the_game(
    builds: dict[str, Path], svc: Running, scripted: ScriptedServer
) -> None:
    """Mara answers through the four steps of DialogueTurn, the scripted provider as her OpenAI-compatible cortex
    and InMemoryNpcs as her memory. The C++ core checks the service's signature with OpenSSL (GET /v1/keys) before
    the turn is done; what it hands on for a game server verifies with the Python SDK; the game applies the outcome
    itself, and the kept state goes back in the next tape."""
    from npcmind_client.signing import canonical, signed_payload, verify

    scripted.set(
        text='{"dialogue": "The old mine? Nobody goes there since the collapse.", "action": {"type": "TALK"}, '
        '"remember": ["A traveller asked about the old mine."]}'
    )
    out = dialogue(builds, svc.server.url, scripted.base_url, "turn")
    first = out["first"]
    assert first["steps"] == ["IdentifyActor", "QueryVector", "ExecuteInference", "Finalize"], out
    assert first["valid"] and first["verified"] and not first["applied"], first
    assert first["dialogue"].startswith("The old mine?") and first["action"]["type"] == "TALK", first
    keys = {k["kid"]: k["public_key"] for k in svc.http.get("/v1/keys").json()["keys"]}
    evidence = first["for_server"]
    payload = signed_payload("mara", evidence["finalize"], evidence["tape"])
    assert verify(evidence["finalize"]["signature"], payload, keys)
    assert canonical(payload) == first["signed_payload"].encode(), "C++'s signed bytes are not the service's"
    assert out["applied"]["applied"], out
    assert out["second"]["for_server"]["tape"]["npcState"]["turns"] == 1, out["second"]  # the kept state went back
    assert out["memories"] == 3 and out["state"]["turns"] == 1, out  # the second turn is not applied


def test_a_cpp_game_refuses_a_signed_line_changed_on_its_way_and_applies_nothing(
    builds: dict[str, Path], svc: Running, scripted: ScriptedServer
) -> None:
    """Between the service and the game, Mara's signed line is changed: OpenSSL finds the signature no longer covers
    it, the turn fails, and nothing is kept."""
    scripted.set(text='{"dialogue": "Rooms are two silver.", "remember": ["A traveller asked for a room."]}')
    out = dialogue(builds, svc.server.url, scripted.base_url, "forge")
    assert "signature does not verify" in out.get("refused", ""), out
    assert (out["memories"], out["state"]) == (0, {}), out


def test_the_readme_says_how_to_run_the_console_game() -> None:
    """The C# package's README had its console game's steps; this one had none (a new user's walk, issue 40)."""
    readme = (PLUGIN / "README.md").read_text()
    console = readme[readme.index("## The console game") :]
    for step in ("--manifest examples/drones.yaml", "build/gcc/npcmind_game http://127.0.0.1:8090", "cmake --build"):
        assert step in readme if step == "cmake --build" else step in console, step
