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
from npcmind.providers.scripted import ScriptedServer

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
    }
    r = run("node", "--test", "--test-concurrency=1", "dist/test/", env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, failures(out)
    summary = dict(line[2:].split(" ", 1) for line in out.splitlines() if line.startswith("# ") and " " in line[2:])
    assert int(summary["fail"]) == 0 and int(summary["skipped"]) == 0 and int(summary["pass"]) >= 15, summary


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


