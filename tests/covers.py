"""Proof that the fast tier (`pytest -m fast`) runs every module of the service and of the Python SDK: it runs the
tier under coverage.py, its `npcmind` subprocesses too, and fails naming each module none of whose functions ran.

Run: .venv/bin/python tests/covers.py [PYTEST ARGS]   (or --data FILE: check a coverage file made before)
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import coverage

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [ROOT / "src" / "npcmind", ROOT / "clients" / "python" / "src" / "npcmind_client"]
RC = """[run]
source_pkgs = npcmind, npcmind_client
parallel = true
patch = subprocess
"""


def function_lines(path: Path) -> set[int]:
    """The lines of every statement inside a function of the module: what only a call runs, not an import."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not _declared_only(node):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _declared_only(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A method of a Protocol: a docstring and `...`, nothing a call could run."""
    return all(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) for s in node.body)


def uncovered(data: coverage.CoverageData) -> list[str]:
    """Each module of the packages that was never imported, or none of whose functions ran."""
    ran = {Path(f).resolve(): set(data.lines(f) or ()) for f in data.measured_files()}
    missing = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            wanted = function_lines(path)
            if path.resolve() not in ran and path.read_text().strip():
                missing.append(f"{path.relative_to(ROOT)}: never imported")
            elif wanted and not wanted & ran.get(path.resolve(), set()):
                missing.append(f"{path.relative_to(ROOT)}: imported, but none of its functions ran")
    return missing


def run_fast_tier(where: Path, pytest_args: list[str]) -> Path:
    """The fast tier under coverage, its data combined into one file in ``where``."""
    rc = where / "coveragerc"
    rc.write_text(RC)
    env = {**os.environ, "COVERAGE_FILE": str(where / ".coverage"), "COVERAGE_RCFILE": str(rc)}
    cmd = [sys.executable, "-m", "coverage", "run", "-m", "pytest", "-m", "fast", "-q", "-p", "no:cacheprovider"]
    status = subprocess.run([*cmd, *pytest_args], cwd=ROOT, env=env).returncode
    if status != 0:
        raise SystemExit(f"the fast tier failed (exit {status}): its coverage proves nothing")
    subprocess.run([sys.executable, "-m", "coverage", "combine", "-q"], cwd=where, env=env, check=True)
    return where / ".coverage"


def main() -> None:
    """Run (or read) the fast tier's coverage and say which modules it leaves out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="a combined coverage data file to check instead of running")
    args, pytest_args = parser.parse_known_args()
    with tempfile.TemporaryDirectory(prefix="npcmind-covers-") as tmp:
        path = args.data or run_fast_tier(Path(tmp), pytest_args)
        data = coverage.CoverageData(basename=str(path))
        data.read()
        missing = uncovered(data)
    modules = sum(1 for p in PACKAGES for _ in p.rglob("*.py"))
    if missing:
        raise SystemExit(f"{len(missing)} of {modules} modules not run by the fast tier:\n" + "\n".join(missing))
    print(f"every one of the {modules} modules of npcmind and npcmind_client ran in the fast tier")


if __name__ == "__main__":
    main()
