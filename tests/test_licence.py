"""One licence for the whole repository (docs/licence.md): every package, found by its manifest, names the same
licence and carries its text and the NOTICE, and what it ships (sdist, wheel, npm tarball) keeps them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LICENCE = "Apache-2.0"
MANIFESTS = ("package.json", "pyproject.toml", "*.csproj", "*.uplugin")  # a new kind of package adds its name here


def manifests() -> list[Path]:
    """Every package manifest of the repository that git would commit (node_modules, build output: ignored)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", *(f"*{m}" if "*" in m else f"*/{m}" for m in MANIFESTS),
         *(m for m in MANIFESTS if "*" not in m)],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return sorted({ROOT / p for p in listed if (ROOT / p).exists() and "node_modules" not in p})


def declared(manifest: Path) -> str | None:
    """The licence the manifest names: None for a kind that has no field for one (an Unreal .uplugin)."""
    if manifest.name == "package.json":
        return str(json.loads(manifest.read_text()).get("license"))
    if manifest.name == "pyproject.toml":
        value = tomllib.loads(manifest.read_text())["project"].get("license")
        return str(value.get("text") if isinstance(value, dict) else value)
    if manifest.suffix == ".csproj":
        found = ET.parse(manifest).find("./PropertyGroup/PackageLicenseExpression")
        return None if found is None else str(found.text)
    if manifest.suffix == ".uplugin":
        return None
    raise AssertionError(f"{manifest}: a manifest of a kind this test cannot read")


def shipped(manifest: Path) -> bool:
    """Whether the package is distributed (a private npm package, such as the demo's sources, is not)."""
    return not (manifest.name == "package.json" and json.loads(manifest.read_text()).get("private") is True)


def package_folder(manifest: Path) -> Path:
    """The folder a manifest's package ships: a Unity package keeps its .csproj in Build~, a folder of that package."""
    folder = manifest.parent
    while folder.name.endswith("~"):
        folder = folder.parent
    return folder


def carried(folder: Path, name: str) -> Path | None:
    """The package's copy of LICENSE or NOTICE (Unity's packages name them .md)."""
    return next((p for p in (folder / name, folder / f"{name}.md") if p.is_file()), None)


def test_the_root_carries_the_licence_text_and_a_notice() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS" in text
    assert "Apache License, Version 2.0" in (ROOT / "NOTICE").read_text()


def test_every_manifest_names_the_same_licence() -> None:
    found = manifests()
    names = {str(m.relative_to(ROOT)) for m in found}
    # the packages of today are found (a glob that found nothing would pass everything below)
    assert {"pyproject.toml", "clients/python/pyproject.toml", "clients/typescript/package.json",
            "clients/csharp/package.json", "clients/csharp/Build~/NpcMind.csproj"} <= names, names  # fmt: skip
    differ = {n: d for n, m in zip(sorted(names), found, strict=True) if (d := declared(m)) not in (LICENCE, None)}
    assert not differ, f"manifests naming another licence than {LICENCE}: {differ}"


def test_every_package_carries_the_licence_text_and_the_notice_as_the_root_has_them() -> None:
    folders = sorted({package_folder(m) for m in manifests() if shipped(m)})
    assert ROOT / "clients" / "csharp" in folders and ROOT / "clients" / "typescript" in folders
    for folder in folders:
        for name in ("LICENSE", "NOTICE"):
            copy = carried(folder, name)
            assert copy is not None, f"{folder.relative_to(ROOT)} has no {name}"
            assert copy.read_bytes() == (ROOT / name).read_bytes(), f"{copy.relative_to(ROOT)} differs from /{name}"


def test_the_notice_names_files_that_exist_and_the_demo_bundle_takes_in_no_npm_package() -> None:
    """A NOTICE naming a file that is gone is stale; the demo bundle's first line lists every source esbuild read,
    and an npm package among them is third-party code the NOTICE must name first."""
    notice = (ROOT / "NOTICE").read_text()
    named = re.findall(r"^((?:src|clients)/\S+)$", notice, re.M)
    assert "clients/python/src/npcmind_client/data/minilm-tokenizer.json" in named, named
    assert all((ROOT / n).is_file() for n in named), [n for n in named if not (ROOT / n).is_file()]
    header = (ROOT / "src" / "npcmind" / "demo" / "demo.js").read_text().split("\n", 1)[0]
    sources = json.loads(header.removeprefix("/* npcmind-demo-sources ").removesuffix(" */"))["files"]
    assert len(sources) > 10
    third_party = [
        s for s in sources if "node_modules" in s or not s.startswith(("clients/demo/", "clients/typescript/"))
    ]
    assert not third_party or all(s in notice for s in third_party), third_party


def build(package: Path, into: Path) -> list[str]:
    """The names inside the sdist and the wheel that setuptools builds from a copy of the package."""
    out = into / "dist"
    code = (
        f"import sys; from setuptools import build_meta as b; b.build_sdist({str(out)!r}); b.build_wheel({str(out)!r})"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=package, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return tarfile.open(sdist).getnames() + zipfile.ZipFile(wheel).namelist()


def copy_tree(source: Path, to: Path, parts: tuple[str, ...]) -> Path:
    """The parts of a package a build reads, without caches and build output."""
    for part in parts:
        if (source / part).is_file():
            (to / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source / part, to / part)
        else:
            ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "node_modules")
            shutil.copytree(source / part, to / part, ignore=ignore)
    return to


@pytest.mark.parametrize(
    "package,parts",
    [
        ("clients/python", ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "src")),
        (".", ("pyproject.toml", "README.md", "LICENSE", "NOTICE", "src", "clients/python/src")),
    ],
)
def test_both_python_distributions_ship_the_licence_and_the_notice(
    package: str, parts: tuple[str, ...], tmp_path: Path
) -> None:
    """In the sdist and in the wheel's .dist-info, as `license-files` puts them."""
    names = build(copy_tree(ROOT / package, tmp_path / "tree", parts), tmp_path)
    for name in ("LICENSE", "NOTICE"):
        assert any(n.endswith(f"/{name}") and ".dist-info/" in n for n in names), (name, names[-20:])
        assert any(re.fullmatch(rf"[^/]+/{name}", n) for n in names), (name, "not in the sdist")


@pytest.mark.skipif(shutil.which("npm") is None, reason="no npm here")
def test_the_npm_tarball_ships_the_licence_and_the_notice(tmp_path: Path) -> None:
    """`npm pack` of the TypeScript SDK (a dry run: the list of what it would put in the tarball)."""
    r = subprocess.run(
        ["npm", "pack", "--dry-run", "--json", "--ignore-scripts"],
        cwd=ROOT / "clients" / "typescript", capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    files = {f["path"] for f in json.loads(r.stdout)[0]["files"]}
    assert {"LICENSE", "NOTICE", "package.json"} <= files, sorted(files)
