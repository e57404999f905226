"""The C# SDK (clients/csharp): build.sh compiles it with Mono's mcs at C# 7.0 (what Unity and Godot 4 .NET
compile) and runs its NUnit tests; here every test must have passed, and the runner must have run every shared
conformance case and policy vector (a C# runner that silently read fewer files would still be green). CI runs
only pytest, so the C# checks run from here."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import Running
from games import kept_the_protocol, played
from npcmind.testing.scripted import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clients" / "csharp"
CONFORMANCE = ROOT / "clients" / "conformance"
BUILD = PACKAGE / "Build~" / "build.sh"  # in a folder Unity does not import, as its output is
OUT = PACKAGE / "Build~" / "out"
DATA = PACKAGE / "Tests" / "Data~"  # the shared cases, copied into the package by `Build~/build.sh data`
TOOLS = ("mcs", "mono", "nunit-console")


missing = [t for t in TOOLS if shutil.which(t) is None]
pytestmark = pytest.mark.skipif(
    bool(missing), reason=f"no {', '.join(missing)} here (Debian: mono-devel nunit-console)"
)
BOUNCY_CASTLE = PACKAGE / "Runtime" / "Plugins" / "BouncyCastle.Crypto.dll"  # the vendored Ed25519 (NOTICE)


def without_libsodium(command: list[str]) -> list[str]:
    """The command run where no libsodium loads: every libsodium file of the system's library folders covered by
    /dev/null in a mount namespace of its own (root: CI and this machine), so the C# SDK's checks are shown to need
    none; where that cannot be done, the command as it is (libsodium may then be there, unused)."""
    found = sorted({str(p) for d in ("/lib", "/usr/lib", "/usr/local/lib") for p in Path(d).rglob("libsodium*")})
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return command
    hide = "".join(f'mount --bind /dev/null "{f}" && ' for f in found)
    probe = "python3 -c 'import ctypes; ctypes.CDLL(\"libsodium.so.23\")' 2>/dev/null && exit 97; "
    return ["unshare", "--mount", "sh", "-c", f'{hide}{probe}exec "$@"', "sh", *command]


def conformance_names() -> list[str]:
    """Every case of clients/conformance/*.json, as the C# runner names its tests."""
    names = []
    for path in sorted(CONFORMANCE.glob("*.json")):
        data = json.loads(path.read_text())
        names += [f"conformance {path.name}: {c['name']}" for c in (data if isinstance(data, list) else [data])]
    return names


def policy_names() -> list[str]:
    """Every policy vector and every refused input of clients/conformance/policy/."""
    blocks = json.loads((CONFORMANCE / "policy" / "cases.json").read_text())
    refused = json.loads((CONFORMANCE / "policy" / "refused.json").read_text())
    return [f"policy vector {b['policy']}: {c['name']}" for b in blocks for c in b["cases"]] + [
        f"refused vector: {v['name']}" for v in refused
    ]


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    """build.sh's NUnit results: test name (without the fixture's namespace) -> its result."""
    xml = OUT / "TestResult.xml"
    xml.unlink(missing_ok=True)
    r = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=600)
    assert xml.exists(), f"build.sh wrote no results (exit {r.returncode}):\n{r.stdout[-4000:]}{r.stderr[-4000:]}"
    found = {}
    for case in ET.parse(xml).iter("test-case"):
        name = case.attrib["name"]
        short = name.split(".", 3)[3] if name.startswith("NpcMind.Tests.") else name
        failure = case.find("failure/message")
        found[short] = case.attrib["result"] + (f": {failure.text}" if failure is not None else "")
    assert r.returncode == 0, "\n".join(f"{n}: {v}" for n, v in found.items() if not v.startswith("Success"))[:8000]
    return found


def test_every_nunit_test_passed(results: dict[str, str]) -> None:
    failed = {n: v for n, v in results.items() if v != "Success"}
    assert not failed, failed
    assert len(results) > 150


def test_every_conformance_case_ran_in_csharp_and_passed(results: dict[str, str]) -> None:
    expected = conformance_names()
    ran = [n for n in results if n.startswith("conformance ")]
    assert len(ran) == len(expected), sorted(set(expected) ^ set(ran))
    assert sorted(ran) == sorted(expected)
    assert all(results[n] == "Success" for n in expected)


def test_every_policy_vector_ran_in_csharp_and_passed(results: dict[str, str]) -> None:
    expected = policy_names()
    ran = [n for n in results if n.startswith(("policy vector ", "refused vector: "))]
    assert sorted(ran) == sorted(expected)
    assert all(results[n] == "Success" for n in expected)


def test_every_error_answer_vector_ran_in_csharp_and_passed(results: dict[str, str]) -> None:
    vectors = json.loads((CONFORMANCE / "errors" / "error-answers.json").read_text())["vectors"]
    expected = [f"error answer: {v['name']}" for v in vectors]
    assert sorted(n for n in results if n.startswith("error answer: ")) == sorted(expected)
    assert all(results[n] == "Success" for n in expected)


def test_the_readme_shows_the_engine_examples_as_they_are() -> None:
    """The README's MonoBehaviour and Godot node are the files build.sh compiles (against the engine stand-ins)."""
    readme = (PACKAGE / "README.md").read_text()
    shown = re.findall(
        r"<!-- run by [^>]*\(the file (\S+), compiled by build.sh[^>]*-->\n```csharp\n(.*?)```", readme, re.S
    )
    assert [name for name, _ in shown] == [
        "Samples~/HelloNpc/BeeBrain.cs",
        "Examples~/Godot/Bee.cs",
        "Samples~/HelloNpc/Innkeeper.cs",
        "Unity/UnityWebRequestSender.cs",
    ]
    for name, block in shown:
        assert block == (PACKAGE / name).read_text(), f"the README's {name} differs from the file"
    marked = r"<!-- run by test_csharp.py::[^>]*\(lines of the file (\S+), compiled[^>]*-->\n```csharp\n(.*?)```"
    top = re.findall(marked, (ROOT / "README.md").read_text(), re.S)
    assert [name for name, _ in top] == ["Samples~/HelloNpc/BeeBrain.cs"], "the project's README shows no C#"
    excerpt = top[0][1]  # the project's README shows the bee's class without its usings: lines of the file as they are
    assert excerpt.count("\n") >= 10 and excerpt in (PACKAGE / top[0][0]).read_text(), "not the file's lines"


def test_every_file_unity_imports_has_its_meta_with_a_guid_of_its_own() -> None:
    """A package added by git URL is read-only in Unity: a file without its .meta is not imported (and a GUID
    given twice breaks references). Unity skips hidden names and names ending in ~; build/ is not committed."""
    seen: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*")):
        parts = path.relative_to(PACKAGE).parts
        if any(p.startswith(".") or p.endswith("~") for p in parts) or path.suffix == ".meta":
            continue
        meta = path.with_name(path.name + ".meta")
        assert meta.exists(), f"{path.relative_to(PACKAGE)} has no .meta: run clients/csharp/Build~/build.sh metas"
        guid = re.search(r"^guid: ([0-9a-f]{32})$", meta.read_text(), re.M)
        assert guid is not None, meta
        assert guid[1] not in seen, (path, seen.get(guid[1]))
        seen[guid[1]] = path
    for meta in PACKAGE.rglob("*.meta"):
        assert meta.with_suffix("").exists() or meta.with_name(meta.name[: -len(".meta")]).exists(), meta


IMPORTED = {".cs", ".asmdef", ".json", ".md"}  # what a file Unity imports from this package may be


def test_unity_imports_no_build_output_no_tool_and_nothing_of_a_folder_it_skips() -> None:
    """Unity imports every file of a package but hidden ones and those under a name ending in ~: a DLL there is a
    duplicate assembly, a script or a .csproj an asset of no use. A .meta under a skipped name is a file Unity was
    told to import that it never sees. After a build (the results fixture's run is not needed: the layout is)."""
    imported, skipped_metas = [], []
    for path in sorted(PACKAGE.rglob("*")):
        parts = path.relative_to(PACKAGE).parts
        if path.is_dir():
            continue
        if any(p.startswith(".") or p.endswith("~") for p in parts):
            skipped_metas += [path] if path.suffix == ".meta" else []
        elif path.suffix != ".meta":
            imported.append(path)
    assert PACKAGE / "Runtime" / "Scheduler.cs" in imported and PACKAGE / "package.json" in imported
    strange = [str(p.relative_to(PACKAGE)) for p in imported if p.suffix not in IMPORTED and p != BOUNCY_CASTLE]
    assert not strange, f"files Unity would import that are no source, manifest or text: {strange}"
    assert not skipped_metas, skipped_metas
    assert OUT.parent.name.endswith("~") and BUILD.parent.name.endswith("~")


def test_the_unity_assembly_is_built_apart_and_the_core_stays_engine_free(results: dict[str, str]) -> None:
    """Unity/ (UnityWebRequestSender, NpcMindRunner) is its own assembly, built against the stand-ins of the Unity
    types it touches; the core neither names UnityEngine nor lets Unity give it an engine reference."""
    assert (OUT / "NpcMind.Unity.dll").is_file() and (OUT / "NpcMind.Runtime.dll").is_file()
    unity = json.loads((PACKAGE / "Unity" / "NpcMind.Unity.asmdef").read_text())
    core = json.loads((PACKAGE / "Runtime" / "NpcMind.Runtime.asmdef").read_text())
    assert unity["references"] == ["NpcMind.Runtime"] and not unity["noEngineReferences"]
    assert core["noEngineReferences"] is True
    assert not [p.name for p in (PACKAGE / "Runtime").glob("*.cs") if "UnityEngine" in p.read_text()]
    runner = (PACKAGE / "Unity" / "NpcMindRunner.cs").read_text()
    assert "class NpcMindRunner : MonoBehaviour" in runner and "Client.Tick()" in runner and "Close()" in runner
    assert "new UnityWebRequestSender()" in runner


def test_the_package_has_what_the_unity_package_manager_shows() -> None:
    manifest = json.loads((PACKAGE / "package.json").read_text())
    for key in ("name", "version", "displayName", "description", "unity", "license", "author", "repository",
                "documentationUrl", "changelogUrl", "licensesUrl"):  # fmt: skip
        assert manifest.get(key), f"package.json has no {key}"
    assert manifest["licensesUrl"].endswith("/LICENSE") and manifest["changelogUrl"].endswith("/CHANGELOG.md")
    assert manifest["documentationUrl"].endswith("/Documentation~/index.md")
    assert manifest["repository"]["directory"] == "clients/csharp"
    for name in ("CHANGELOG.md", "Documentation~/index.md", "LICENSE.md", "NOTICE.md", "README.md"):
        assert (PACKAGE / name).is_file(), name
    assert f"## [{manifest['version']}]" in (PACKAGE / "CHANGELOG.md").read_text()


def test_the_packages_copy_of_the_shared_cases_is_the_repositorys() -> None:
    """Tests/Data~ holds what the C# tests read, so they run from the package alone; `Build~/build.sh data` copies
    it, and here it must be what clients/conformance and docs/signature-vectors.json hold, file for file."""
    sources = {p.relative_to(CONFORMANCE).as_posix(): p for p in CONFORMANCE.rglob("*.json")}
    copies = {p.relative_to(DATA / "conformance").as_posix(): p for p in (DATA / "conformance").rglob("*.json")}
    assert len(sources) > 20
    assert sorted(copies) == sorted(sources), "run clients/csharp/Build~/build.sh data"
    stale = [n for n, p in sources.items() if p.read_bytes() != copies[n].read_bytes()]
    assert not stale, f"{stale}: run clients/csharp/Build~/build.sh data"
    vectors = ROOT / "docs" / "signature-vectors.json"
    assert (DATA / "signature-vectors.json").read_bytes() == vectors.read_bytes(), "run Build~/build.sh data"


def test_the_package_alone_builds_and_passes_its_tests_as_a_git_url_install_has_it(
    results: dict[str, str], tmp_path: Path
) -> None:
    """Only clients/csharp/, copied elsewhere (nothing of the repository beside it: Unity's git-URL install keeps the
    package's folder alone), builds and runs every test that the checkout runs, the shared cases included."""
    alone = tmp_path / "Packages" / "com.npcmind.client"
    shutil.copytree(PACKAGE, alone, ignore=shutil.ignore_patterns("out"))
    env = {k: v for k, v in os.environ.items() if k != "NPCMIND_CONFORMANCE"}
    r = subprocess.run([str(alone / "Build~" / "build.sh")], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    cases = list(ET.parse(alone / "Build~" / "out" / "TestResult.xml").iter("test-case"))
    assert len(cases) == len(results) and all(c.attrib["result"] == "Success" for c in cases)
    ran = [c.attrib["name"] for c in cases]
    assert sum(" conformance " in n or ".conformance " in n for n in ran) == len(conformance_names()), ran[:5]
    assert not (tmp_path / "Packages" / "conformance").exists() and not (tmp_path / "docs").exists()


# --- a C# game against a real service ------------------------------------------------------------------------


def test_a_csharp_game_of_20_drones_at_60_hz_keeps_the_protocol_through_faults_and_a_stopped_service(
    results: dict[str, str], scripted: ScriptedServer, tmp_path: Path
) -> None:
    """The console game (clients/csharp/Examples~/Console/Game.cs, built by build.sh) on a manifest of its own:
    decisions from the model while the provider answers, the game's native AI (never an AI decision asked after
    the fault began) while the provider fails and after the service stopped, and in every phase no illegal action,
    no decision of an older epoch (it raises its epoch every 2 s), none past its expiry, and no exception. Its
    Tick() times are printed (docs/bench.md: a bench figure, not asserted). The phases are the game's stated run
    time, not waits for something: a phase begins after the fault (or the stop) is in place, decisions live
    1.5 s, and an AI choice counts as late from 2 s into a phase."""
    kept_the_protocol(played(["mono", str(OUT / "NpcMindGame.exe")], scripted, tmp_path), "thrown")


# --- the cases fail when the C# scheduler is broken on purpose --------------------------------------------------

# (file, the text as it is, the text broken, a case or vector that must then fail)
BREAKS = [
    ("Scheduler.cs", "if (answer.Epoch != Roster.Epoch || s.Epoch != Roster.Epoch)", "if (answer.Epoch < -1)",
     "conformance epoch-old-answer-dropped.json: "),
    ("Roster.cs", "if (!legal.Contains(d.Action))", "if (legal == null)",
     "conformance illegal-action-never-used.json: "),
    ("Roster.cs", "if (now >= c.ExpiresAt)", "if (now < 0)", "conformance expiry.json: "),
    ("Roster.cs", "public const double ReaskGapMs = 500;", "public const double ReaskGapMs = 0;",
     "conformance population.json: "),
    ("Outbox.cs", "if (status == 413 && items.Count > 1)", "if (status == 999)", "conformance telemetry.json: "),
    ("Session.cs", "renewAt = Json.IsNumber(ttl) ? now + 0.9 *", "renewAt = Json.IsNumber(ttl) ? now + 2.0 *",
     "conformance hosted.json: "),
    ("Policy.cs", "if (p > bestP) { best = places[j];", "if (p >= bestP && p > 0) { best = places[j];",
     "policy vector handmade.policy.json: a tie goes to the first action in the file's order"),
    ("Jcs.cs", "keys.Sort(string.CompareOrdinal);", "keys.Sort(string.CompareOrdinal); keys.Reverse();",
     "jcs vector: RFC 8785 section 3.2.3 sorting by UTF-16 code units"),
    ("Json.cs", "bool up = rest[0] > '5'", "bool up = rest[0] > '9'",
     "NpcTests.EveryNumberOfRfc8785AppendixBIsWrittenAsEcmaScriptWritesIt"),
    ("Signing.cs", "{ \"tapeDigest\", Jcs.Digest(tape) },", "{ \"tapeDigest\", Jcs.Digest(verdict) },",
     "NpcTests.TheSignedPayloadIsTheBytesTheServiceSigned"),
    ("Signing.cs", "if (sigRaw == null || keyRaw == null || B64(sigRaw) != sig)",
     "if (sigRaw == null || keyRaw == null)",
     "NpcTests.ASignedOutcomeVerifiesAndAnyChangedByteFails"),
    ("Npc.cs", "throw new SignatureException(\"the outcome's signature does not verify",
     "if (outcome.Verified) throw new SignatureException(\"the outcome's signature does not verify",
     "NpcTests.ProcessVerifiesTheOutcomeAndRefusesOneThatDoesNotVerify"),
    ("Npc.cs", "if (!outcome.Valid || !outcome.Verified) return outcome;", "if (!outcome.Valid) return outcome;",
     "NpcTests.ATurnNothingVerifiedHereRunsTheStepsAndHandsBackWhatAServerChecksWithNothingApplied"),
    ("Npc.cs", "return Apply(outcome);", "return outcome;",
     "NpcTests.AVerifiedOutcomeIsAppliedByTheSdkAndAForgedOneAppliesNothing"),
    ("Cortex.cs", "if (param is string) return candidates.Contains((string)param) ? (string)param : null;",
     "if (param is string) return null;",
     "CortexTests.ARefusedParameterIsDroppedTheLimitRenamedAndTheCallAskedAgain"),
    ("DecideClient.cs", "core.Roster.Threshold = value;", "GC.KeepAlive(value);",
     "TransportTests.ScopeScopeStateAndThresholdChangeAsTheGameGoes"),
    ("DecideClient.cs", "set { core.Scope = value; }", "set { }", "conformance live-settings.json: live scope: "),
    ("DecideClient.cs", "set { core.ScopeState = value; }", "set { GC.KeepAlive(value); }",
     "conformance live-settings.json: live scope: "),
    ("DecideClient.cs", "core.Roster.Threshold = value;", "if (value < 0) core.Roster.Threshold = value;",
     "conformance live-settings.json: live threshold: "),
    ("Errors.cs", "status, ReadError(body).Code);", "status, null);",
     "NpcTests.ARefusedStepIsAServiceExceptionWithTheStatusTheCodeAndTheProblemByPath"),
]  # fmt: skip


@pytest.mark.parametrize("file,right,wrong,fails", BREAKS, ids=[f"{b[0]}: {b[2]}" for b in BREAKS])
def test_the_shared_cases_fail_when_the_csharp_sdk_is_broken_on_purpose(
    file: str, right: str, wrong: str, fails: str, tmp_path: Path
) -> None:
    """A runner that passed whatever the scheduler did would prove nothing: with one rule broken in a copy of the
    package, build.sh's run fails, and it fails the case that pins that rule."""
    failed = failed_when_changed(tmp_path, f"Runtime/{file}", right, wrong)
    assert any(fails in name for name in failed), failed


def failed_when_changed(tmp_path: Path, file: str, right: str, wrong: str) -> list[str]:
    """The NUnit tests that fail once ``right`` (there once) is ``wrong`` in a copy of the package's ``file``: its
    build.sh must then fail."""
    copy = tmp_path / "csharp"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("out"))
    source = copy / file
    text = source.read_text()
    assert text.count(right) == 1, f"{file} no longer holds {right!r}: update the list of breaks"
    source.write_text(text.replace(right, wrong))
    r = subprocess.run([str(copy / "Build~" / "build.sh")], capture_output=True, text=True, timeout=600)
    assert r.returncode != 0, f"every test passed with {wrong!r} in {file}"
    return [
        c.attrib["name"] for c in ET.parse(copy / "Build~" / "out" / "TestResult.xml").iter("test-case")
        if c.attrib.get("success") == "False"
    ]  # fmt: skip


# (the sample file, the text as it is, the text that allocates every frame): the engine test must then fail
SAMPLE_BREAKS = [
    ('npcmind.Client.Track(id, "bee", seen, Legal);',
     'npcmind.Client.Track(id, "bee", new Dictionary<string, object> { { "hp_fraction", hp } }, Legal);'),
    ("npcmind.Client.Action(id);", "npcmind.Client.Action(name);"),
]  # fmt: skip


@pytest.mark.parametrize("right,wrong", SAMPLE_BREAKS, ids=["a new observation a frame", "Unity's name read a frame"])
def test_the_sample_bees_allocation_test_fails_when_the_bee_allocates(right: str, wrong: str, tmp_path: Path) -> None:
    """The engine test counts the bytes the runner's Tick and the sample bee's Update allocate over 300 frames (the
    Unity stand-ins' `name` makes a string at each read, as Unity's does): with the bee making a dictionary a
    frame, or reading its name a frame, it fails, and nothing else does."""
    failed = failed_when_changed(tmp_path, "Samples~/HelloNpc/BeeBrain.cs", right, wrong)
    assert failed == ["NpcMind.Tests.EngineTests.TheSampleBeeAllocatesNothingPerFrameOnceItsDecisionCame"], failed


# --- hosted sessions and the service's policy, over HttpClient ----------------------------------------------------


def probe(*args: str) -> dict[str, Any]:
    """Examples~/Console/Probe.cs (built by build.sh) run with these arguments: its JSON line."""
    r = subprocess.run(["mono", str(OUT / "NpcMindProbe.exe"), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-4000:]
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def test_a_hosted_csharp_game_opens_a_session_with_its_key_and_decides_with_the_token(
    results: dict[str, str], start_service: Callable[..., Running], scripted: ScriptedServer, tmp_path: Path
) -> None:
    """The token of POST /v1/session is put by the transport into the requests made while it was asked for
    (`Bearer @ref`), over a real HttpClient; a wrong key is said once, and the entity runs its native AI."""
    from conftest import HOSTED, write_clients

    clients, keys = write_clients(tmp_path)
    hosted = start_service(clients=str(clients), base_url=scripted.base_url, **HOSTED)
    out = probe(hosted.server.url, "hosted", "game-1", keys["game-1"])
    assert out["decided"] and out["source"] == "AI", out
    assert out["first"] == "POST /v1/session" and "POST /v1/decide" in out["seen"], out
    assert out["refused_said"] and out["refused_action"] is None, out


def test_the_services_distilled_policy_is_fetched_by_csharp_and_decides_locally(
    results: dict[str, str], start_service: Callable[..., Running], scripted: ScriptedServer, tmp_path: Path
) -> None:
    """GET /v1/policy's body comes as bytes over HttpClient, is loaded for the manifest version the service runs,
    and decides the entities it is sure of: source local, no decision id, nothing more asked of the service."""
    from test_typescript import policy_store

    service = start_service(
        provider="openai", base_url=scripted.base_url, store=policy_store(tmp_path / "policy.db", "cs-policy")
    )
    scripted.set(choose={"p1": "chase", "p2": "chase"})
    out = probe(service.server.url, "policy", "cs-policy")
    assert out["fetched"] and out["before"] == "AI", out
    for got in out["after"]:
        assert got["source"] == "local" and got["action"] == "flee" and got["decision_id"] is None, out
        assert got["confidence"] >= 0.8, out
    assert (out["local"], out["asked_more"]) == (2, 0), out


# --- Ed25519: the vendored Bouncy Castle -------------------------------------------------------------------------


def test_the_vendored_ed25519_is_the_notices_file_strong_named_by_bouncy_castle() -> None:
    """The DLL is the one NOTICE.md names (its SHA-256), and its strong-name signature verifies under the public key
    whose token is Bouncy Castle's (0e99375e54769942): a DLL changed by one byte no longer does."""
    import hashlib

    digest = hashlib.sha256(BOUNCY_CASTLE.read_bytes()).hexdigest()
    assert f"SHA-256 {digest}" in (PACKAGE / "NOTICE.md").read_text()
    assert (BOUNCY_CASTLE.parent / "BouncyCastle.Crypto.LICENSE.md").read_text().count("Legion of the Bouncy Castle")
    if shutil.which("sn") is None:
        pytest.skip("no sn here (Debian: mono-devel)")
    token = subprocess.run(["sn", "-T", str(BOUNCY_CASTLE)], capture_output=True, text=True, timeout=60).stdout
    assert "Public Key Token: 0e99375e54769942" in token, token
    verified = subprocess.run(["sn", "-v", str(BOUNCY_CASTLE)], capture_output=True, text=True, timeout=60).stdout
    assert "is strongnamed" in verified and "not strongnamed" not in verified, verified


def test_csharp_verifies_every_signature_as_python_does(results: dict[str, str]) -> None:
    """Ed25519.Verify (the vendored Bouncy Castle, in a process where no libsodium loads) against the Python SDK's
    check (the cryptography package) on 600 derandomized cases: valid signatures of messages of 0 to 300 bytes, one
    bit flipped in the signature, the key or the message, S + L (RFC 8032's non-canonical S), a key of another
    signer, random bytes. Both must give the same answer on every case, and the valid ones must be accepted."""
    import random

    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    order = 2**252 + 27742317777372353535851937790883648493
    rng = random.Random(41)
    cases: list[tuple[bytes, bytes, bytes]] = []
    for i in range(600):
        key = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32))
        public, message = key.public_key().public_bytes_raw(), rng.randbytes(rng.randrange(0, 300))
        signature = bytearray(key.sign(message))
        kind = i % 6
        if kind == 1:
            signature[rng.randrange(64)] ^= 1 << rng.randrange(8)
        elif kind == 2:
            at = rng.randrange(32)
            public = public[:at] + bytes([public[at] ^ 1]) + public[at + 1 :]
        elif kind == 3 and message:
            message = bytes([message[0] ^ 0x80]) + message[1:]
        elif kind == 4:
            s = int.from_bytes(signature[32:], "little") + order
            signature[32:] = s.to_bytes(32, "little") if s < 2**256 else signature[32:]
        elif kind == 5:
            signature = bytearray(rng.randbytes(64)) if i % 12 == 5 else signature
            public = Ed25519PrivateKey.from_private_bytes(rng.randbytes(32)).public_key().public_bytes_raw()
        cases.append((public, bytes(signature), message))

    def python(public: bytes, signature: bytes, message: bytes) -> str:
        try:
            Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
        except (InvalidSignature, ValueError):
            return "0"
        return "1"

    lines = "".join(f"{p.hex()} {s.hex()} {m.hex()}\n" for p, s, m in cases)
    command = without_libsodium(["mono", str(OUT / "NpcMindDialogue.exe"), "verify"])
    r = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    got, want = r.stdout.split(), [python(*c) for c in cases]
    assert len(got) == len(cases)
    differ = [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert not differ, differ[:5]
    assert all(got[i] == "1" for i in range(0, 600, 6)) and got.count("0") > 450, got.count("1")


# --- dialogue NPCs: DialogueClient against a real service -------------------------------------------------------


def dialogue(*args: str) -> dict[str, Any]:
    """Examples~/Console/Dialogue.cs (built by build.sh) run with these arguments: its JSON line."""
    command = without_libsodium(["mono", str(OUT / "NpcMindDialogue.exe"), *args])
    r = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert r.returncode != 97, "libsodium still loads where it was hidden"
    assert r.returncode == 0 and r.stdout.strip(), r.stderr[-4000:]
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def readme_server_check() -> Callable[[dict[str, Any], dict[str, str]], bool]:
    """The README's Python block for a game server that checks what a C# game sent: its `checked` function."""
    readme = (PACKAGE / "README.md").read_text()
    block = re.search(r"<!-- run by test_csharp.py::test_a_csharp_dialogue[^>]*-->\n```python\n(.*?)```", readme, re.S)
    assert block is not None, "the README shows no server check"
    scope: dict[str, Any] = {}
    exec(compile(block[1], "clients/csharp/README.md", "exec"), scope)
    return scope["checked"]  # type: ignore[no-any-return]


def test_a_csharp_dialogue_npc_gets_the_outcome_the_service_signed_and_its_server_can_check_it(
    results: dict[str, str], svc: Running, scripted: ScriptedServer
) -> None:
    """Mara answers over HttpClient through the four steps, the scripted provider as her cortex. The C# SDK checks
    the service's signature with the vendored Bouncy Castle (no libsodium loads in its process: without_libsodium) and
    applies the verified outcome to her memory, as the Python and TypeScript SDKs do; what it hands
    on for a game server is what the service signed: Python's verify accepts it, its canonical bytes are the C#
    SDK's, and a changed line fails. The state the SDK kept goes back in the next tape."""
    from npcmind_client.signing import canonical, signed_payload, verify

    scripted.set(
        text='{"dialogue": "The old mine? Nobody goes there since the collapse.", "action": {"type": "TALK"}, '
        '"remember": ["A traveller asked about the old mine."]}'
    )
    out = dialogue(svc.server.url, scripted.base_url, "turn")
    first = out["first"]
    assert first["steps"] == ["IdentifyActor", "QueryVector", "ExecuteInference", "Finalize"], out
    assert out["library"].startswith("BouncyCastle.Crypto 1.9.0"), out
    assert first["valid"] and first["verified"] and first["applied"], first
    assert first["dialogue"].startswith("The old mine?") and first["action"]["type"] == "TALK", first
    assert first["remembered"] == 3 and first["state"]["turns"] == 1, first  # verified, then applied by the SDK
    prompt = scripted.requests[0]["messages"][0]["content"]
    assert "afraid of the old mine" in prompt and '"gold": 12' in prompt, prompt

    keys = {k["kid"]: k["public_key"] for k in svc.http.get("/v1/keys").json()["keys"]}
    evidence = first["for_server"]
    fin, tape = evidence["finalize"], evidence["tape"]
    assert evidence["npcId"] == "mara" and fin["signature"] == first["signature"]
    payload = signed_payload("mara", fin, tape)
    assert verify(fin["signature"], payload, keys), "the service's signature does not verify on what C# handed on"
    assert canonical(payload) == first["signed_payload"].encode(), "C#'s signed bytes are not the service's"
    changed = {**fin, "dialogue": fin["dialogue"] + " (and a free room)"}
    assert not verify(fin["signature"], signed_payload("mara", changed, tape), keys)
    assert not verify(fin["signature"], signed_payload("bob", fin, tape), keys)
    checked = readme_server_check()  # the README's lines for a game server, on what C# handed on
    assert checked(evidence, keys) and not checked({**evidence, "finalize": changed}, keys)
    assert not checked({**evidence, "finalize": {**fin, "signature": None}}, keys)

    second = out["second"]
    assert second["for_server"]["tape"]["npcState"]["turns"] == 1, second  # the kept state went back
    assert second["applied"] and second["state"]["turns"] == 2, second
    assert out["memories"] == 3 + second["remembered"] and out["state"] == second["state"], out


def test_a_csharp_game_refuses_a_signed_line_changed_on_its_way(
    results: dict[str, str], svc: Running, scripted: ScriptedServer
) -> None:
    """Between the service and the game, Mara's signed line is changed: the SDK finds the signature no longer
    covers it, the C# SDK refuses the outcome (a SignatureException, not the service's refusal), and nothing is
    kept, where a true outcome is applied by the SDK."""
    scripted.set(text='{"dialogue": "Rooms are two silver.", "remember": ["A traveller asked for a room."]}')
    out = dialogue(svc.server.url, scripted.base_url, "forge")
    assert "signature does not verify" in out.get("refused", ""), out
    assert out["error"] == {"kind": "SignatureException", "status": None, "code": None}, out
    assert (out["memories"], out["state"]) == (0, {}), out


def test_a_csharp_game_that_changes_its_tape_is_refused_by_the_service_and_a_blocked_line_has_nothing_to_apply(
    results: dict[str, str], svc: Running, scripted: ScriptedServer
) -> None:
    """A tape changed after the service returned it (Mara's state, after her prompt was built) is a 422 at
    tape.stepToken, said by the C# SDK's ServiceException with the service's status and code; an output the
    ruleset blocks is her refusal line, unsigned, and nothing is kept."""
    scripted.set(text='{"dialogue": "Welcome."}')
    out = dialogue(svc.server.url, scripted.base_url, "tamper")
    assert "422" in out["refused"] and "tape.stepToken" in out["refused"], out
    assert out["error"] == {"kind": "ServiceException", "status": 422, "code": "invalid_request"}, out
    assert "changed after the service returned it" in out["refused"], out
    assert (out["memories"], out["state"]) == (0, {}), out

    scripted.set(text="I murder the innocent villager.")
    out = dialogue(svc.server.url, scripted.base_url, "turn", "rpg")
    first = out["first"]
    assert not first["valid"] and first["signature"] is None and first["signed_payload"] is None, first
    assert "Let us speak of other things" in first["dialogue"] and first["audit"]["preset"] == "rpg", first
    assert not first["applied"] and "second" not in out and (out["memories"], out["state"]) == (0, {}), out


def test_the_csharp_cortex_asks_a_real_model_again_without_the_parameters_it_refused(
    results: dict[str, str], scripted: ScriptedServer
) -> None:
    """OpenAICortex against a chat-completions server (the scripted provider) that answers a 400 naming each of
    temperature and max_tokens, as OpenAI's reasoning models do: asked again without temperature, the limit as
    max_completion_tokens, and the next call sends neither; a refusal of a parameter it cannot leave out is the
    CortexException with the server's status and code."""
    scripted.set(text="Well met, traveller.", reject_params=["temperature", "max_tokens"])
    out = dialogue("-", scripted.base_url, "cortex")
    assert (out.get("first"), out.get("second")) == ("Well met, traveller.", "Well met, traveller."), out
    assert out["refused"] == ["temperature", "max_tokens"] and len(out["said"]) == 2, out
    sent = [sorted(set(r) - {"model", "messages"}) for r in scripted.requests]
    assert sent == [
        ["max_tokens", "stop", "temperature"],
        ["max_tokens", "stop"],
        ["max_completion_tokens", "stop"],
        ["max_completion_tokens", "stop"],
    ], sent
    assert scripted.requests[-1]["max_completion_tokens"] == 60, scripted.requests[-1]

    scripted.set(text="Hm.", reject_params=["messages"])
    out = dialogue("-", scripted.base_url, "cortex")
    assert out["refused"] == [] and out["error"]["status"] == 400, out
    assert out["error"]["code"] == "unsupported_parameter" and "'messages'" in out["error"]["message"], out


def test_csharp_reads_every_number_as_python_does(results: dict[str, str]) -> None:
    """Json.Parse gives the double nearest each literal (a tape goes back to the service as it came, or its step
    token refuses it): 30,000 derandomized literals, the shortest form of random doubles (a third subnormal),
    fractions, and decimals of up to 25 digits, against Python's float()."""
    import random
    import struct

    rng = random.Random(32)
    literals = []
    for i in range(10_000):
        bits = rng.getrandbits(64) & (0x800F_FFFF_FFFF_FFFF if i % 3 == 1 else 0xFFFF_FFFF_FFFF_FFFF)
        x = struct.unpack(">d", bits.to_bytes(8, "big"))[0]
        literals.append(repr(x) if math.isfinite(x) else "0.5")
        literals.append(repr(rng.randint(0, 999) / rng.randint(1, 999)))
        digits = str(rng.randint(1, 10 ** rng.randint(1, 25)))
        literals.append(f"{digits[:1]}.{digits[1:] or 0}e{rng.randint(-330, 310)}")
    r = subprocess.run(
        ["mono", str(OUT / "NpcMindDialogue.exe"), "read"],
        input="\n".join(literals) + "\n", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    read = r.stdout.split()
    assert len(read) == len(literals)
    want = [struct.pack(">d", float(t)).hex() for t in literals]
    differ = [(t, got, w) for t, got, w in zip(literals, read, want, strict=True) if got != w]
    assert not differ, differ[:5]


def test_csharp_writes_every_number_as_the_python_sdk_does(results: dict[str, str]) -> None:
    """The canonical form's numbers (what a signature covers) from C#'s exact digits, on 20,000 derandomized
    doubles (a quarter subnormal, a quarter integers near 2^53), against the Python SDK's jcs.number."""
    import struct

    from npcmind_client.jcs import number

    r = subprocess.run(
        ["mono", str(OUT / "NpcMindDialogue.exe"), "numbers", "32", "20000"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    lines = r.stdout.split()
    pairs = list(zip(lines[::2], lines[1::2], strict=True))
    assert len(pairs) > 19000

    def double(bits: str) -> float:
        return float(struct.unpack(">d", bytes.fromhex(bits))[0])

    differ = [(bits, text, number(double(bits))) for bits, text in pairs if number(double(bits)) != text]
    assert not differ, differ[:5]


def test_the_readme_says_where_the_whole_csharp_file_is_and_how_to_run_the_console_game() -> None:
    """The README's bee is an excerpt (no `using`, no closing brace) that said so nowhere, and the console game had
    no documented way to run it, nor which manifest it needs (issue 40, friction 4)."""
    readme = (ROOT / "README.md").read_text()
    before = readme[: readme.index("```csharp")].rsplit("\n\n", 2)[-2]  # the paragraph before the block's mark
    assert "(clients/csharp/README.md#a-monobehaviour-unity)" in before and "whole file" in before, before
    sdk = (PACKAGE / "README.md").read_text()
    console = sdk[sdk.index("## The console game") :]
    for step in ("Build~/build.sh build", "--manifest examples/drones.yaml", "mono Build~/out/NpcMindGame.exe"):
        assert step in console, step  # the steps as they run: the script, its output and the manifest games.py plays


# --- the amplification harness's C# surfaces (bench/amplify/sdk_csharp.py) ---------------------------------------


@pytest.mark.parametrize("surface", range(5), ids=lambda i: f"surface {i}")
def test_the_amplification_harness_still_builds_and_feeds_each_csharp_surface(surface: int) -> None:
    """The standing harness of issue 39 compiles its program with the SDK's sources: when Ed25519 moved to the
    vendored Bouncy Castle, its C# rows all CRASHED (mcs: `Org` unknown) and no test said so. Each surface is built
    and fed its smallest input here; the figures stay the bench's."""
    from amplify.sdk_csharp import SURFACES

    assert len(SURFACES) == 5, "a C# surface added or gone: update the range above"
    with SURFACES[surface].start() as feed:
        cost = feed(10)
    assert cost.seconds >= 0 and cost.note, cost
