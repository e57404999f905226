"""The C# SDK (clients/csharp): build.sh compiles it with Mono's mcs at C# 7.0 (what Unity and Godot 4 .NET
compile) and runs its NUnit tests; here every test must have passed, and the runner must have run every shared
conformance case and policy vector (a C# runner that silently read fewer files would still be green). CI runs
only pytest, so the C# checks run from here."""

from __future__ import annotations

import json
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "clients" / "csharp"
CONFORMANCE = ROOT / "clients" / "conformance"
TOOLS = ("mcs", "mono", "nunit-console")
missing = [t for t in TOOLS if shutil.which(t) is None]
pytestmark = [
    pytest.mark.fast,  # about 15 s on 2 cores: no service, no model
    pytest.mark.skipif(bool(missing), reason=f"no {', '.join(missing)} here (Debian: mono-devel nunit-console)"),
]


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
    xml = PACKAGE / "build" / "TestResult.xml"
    xml.unlink(missing_ok=True)
    r = subprocess.run(["./build.sh"], cwd=PACKAGE, capture_output=True, text=True, timeout=600)
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
