"""The client distribution a game installs (clients/python, `npcmind-client`): alone, without the service's
dependencies, and bundled inside the service's own package."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

from conftest import BEE_OBS, ROOT, Running
from npcmind.testing.scripted import ScriptedServer
from npcmind_client.shared import SHARED

CLIENT = ROOT / "clients" / "python" / "src" / "npcmind_client"

GAME = """
import json, sys, time
import npcmind_client
from npcmind_client import DecideClient, DecideOptions

world = {"player_hp_fraction": 0.4, "repellent": False}
with DecideClient(sys.argv[1], "game-1", options=DecideOptions(world=world)) as c:
    c.track("b0", "bee", json.loads(sys.argv[2]), ["idle", "wander", "chase", "flee"])
    deadline = time.monotonic() + 60
    while c.action("b0") is None and time.monotonic() < deadline:
        c.tick()
        c.wait()
    choice = c.action("b0")
print(json.dumps({"action": choice and choice.action, "source": choice and choice.source,
                  "where": npcmind_client.__file__}))
"""


def copy(source: Path, to: Path) -> Path:
    """A copy of a file or a source tree, without caches: pip builds in the tree it installs."""
    to.parent.mkdir(parents=True, exist_ok=True)
    if source.is_file():
        shutil.copy(source, to)
    else:
        shutil.copytree(source, to, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    return to


def test_a_game_installs_the_client_alone_and_decides_through_it(
    svc: Running, scripted: ScriptedServer, tmp_path: Path
) -> None:
    scripted.set(choose={"b0": "flee"})
    env_dir = tmp_path / "game-venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    alone = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing of this checkout on the path
    installed = subprocess.run(
        [*pip, "install", "-q", str(ROOT / "clients" / "python")],
        capture_output=True,
        text=True,
        timeout=600,
        env=alone,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    listed = subprocess.run([*pip, "list", "--format=json"], capture_output=True, text=True, check=True, env=alone)
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "npcmind-client" in names and "httpx" in names
    assert not names & {"litestar", "uvicorn", "aiohttp", "npcmind", "msgspec"}, names
    game = tmp_path / "game.py"
    game.write_text(GAME)
    ran = subprocess.run(
        [str(python), str(game), svc.server.url, json.dumps(BEE_OBS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,  # not the repository: the import must come from the venv
        env=alone,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    out = json.loads(ran.stdout.strip().splitlines()[-1])
    assert out["action"] == "flee" and out["source"] == "AI"
    assert str(env_dir) in out["where"]


def test_the_service_wheel_bundles_the_client_with_its_data(tmp_path: Path) -> None:
    """A non-editable `pip install .` of the service gets `npcmind_client` (npcmind.sdk re-exports it)."""
    tree = tmp_path / "service"
    for part in ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "src", "clients/python/src"):
        copy(ROOT / part, tree / part)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(tree)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("npcmind-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in (
        "npcmind_client/__init__.py",
        "npcmind_client/scheduler.py",
        "npcmind_client/py.typed",
        "npcmind_client/data/minilm-tokenizer.json",
        "npcmind/sdk/__init__.py",
    ):
        assert name in names, f"{name} is missing from {wheel.name}"


def test_the_client_imports_nothing_of_the_service() -> None:
    """`npcmind_client` must install and run without the service: not one import of `npcmind`."""
    sources = (ROOT / "clients" / "python" / "src" / "npcmind_client").rglob("*.py")
    offending = [
        f"{p.name}: {line.strip()}"
        for p in sources
        for line in p.read_text().splitlines()
        if line.lstrip().startswith(("from npcmind.", "import npcmind.", "from npcmind import", "import npcmind "))
    ]
    assert not offending, offending


def imported(path: Path) -> set[str]:
    """The modules a source file imports (``from a.b import c``: ``a.b``), at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
    return found


def test_the_service_imports_of_the_client_are_the_shared_modules_listed() -> None:
    """The server depends on the client only through `npcmind_client.shared.SHARED` (the SDK alias
    `npcmind.sdk` aside): a new shared module is listed with why, and a module no longer shared leaves it."""
    used: dict[str, list[str]] = {}
    for path in (ROOT / "src" / "npcmind").rglob("*.py"):
        if "sdk" in path.relative_to(ROOT / "src" / "npcmind").parts[:1]:
            continue  # the old name of the whole SDK, a re-export
        for module in imported(path):
            if module.startswith("npcmind_client."):
                used.setdefault(module.split(".")[1], []).append(str(path.relative_to(ROOT)))
    assert set(used) == set(SHARED), f"used by the service: {used}; listed in npcmind_client/shared.py: {SHARED}"
    assert all((CLIENT / f"{name}.py").is_file() and why for name, why in SHARED.items())


def test_the_shared_modules_need_nothing_the_service_does_not_install() -> None:
    """The service's base install imports the shared modules (and the client modules they import): their
    third-party imports are among the service's own dependencies, not only the client's `npc` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    installs = {re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0].lower().replace("-", "_") for d in project["dependencies"]}
    todo, seen, needed = list(SHARED), set(), set()
    while todo:
        name = todo.pop()
        seen.add(name)
        for module in imported(CLIENT / f"{name}.py"):
            top = module.split(".")[0]
            if top == "npcmind_client":
                todo += [m for m in module.split(".")[1:2] if m not in seen]
            elif top not in sys.stdlib_module_names and top != "__future__":
                needed.add(top)
    assert needed and needed <= installs, f"the shared modules import {needed}; the service installs {installs}"
