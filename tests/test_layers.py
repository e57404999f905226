"""The package graph stays layered: every import in src/npcmind points down the layer list; no package or module
imports itself back.

docs/architecture.md draws the same list and says why each package sits where it does; this test holds it. It reads
the imports with ast (those inside functions and under TYPE_CHECKING count too: a lazy import is still a
dependency), so it needs no service and imports nothing of npcmind.
"""

from __future__ import annotations

import ast
import itertools
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast  # the whole file is in the fast tier (docs/testing.md)

SRC = Path(__file__).resolve().parents[1] / "src" / "npcmind"

# Lowest first. A package may import any package of a lower layer, none of its own layer, none above.
# "__init__" is the top package's own module (npcmind/__init__.py: the protocol version numbers).
LAYERS: list[tuple[str, ...]] = [
    ("__init__", "config", "failures"),  # values and the failure log every layer may use; they import nothing
    ("protocol",),  # the wire format
    ("manifest",),  # the game's description, checked against the protocol
    ("answer",),  # the answer format: what the prompt asks for and every provider parses
    ("local",),  # per-process state (metrics): any owner above may keep its state here
    ("storage", "shared", "providers"),  # durable and shared soft state; the model APIs
    ("decide", "distill"),  # one batch's decision; the model trained from stored decisions
    ("context", "replay"),  # a session's scene and memory, feeding the pipeline; the kept calls replayed offline
    ("sessions", "npc"),  # who is asking (tokens, rates); the dialogue NPCs
    ("service",),  # one process's parts, wired together
    ("http",),  # the routes and the server
    ("cluster", "testing"),  # processes behind a proxy; the scripted model server (a test tool)
    ("demo", "sdk"),  # the browser demo; the client library, re-exported for `npcmind chat`
    ("cli",),  # the commands
]

# Third-party libraries that mark a boundary: only these packages may import them.
BOUNDARIES: dict[str, tuple[str, ...]] = {
    "litestar": ("http", "testing"),
    "uvicorn": ("http", "cli"),
    "httptools": ("providers",),  # the provider calls' HTTP (uvicorn parses the service's own with it)
    "asyncpg": ("storage",),
    "zstandard": ("storage",),
    "redis": ("shared",),
    "prometheus_client": ("local",),
}

RANK = {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}

Edge = tuple[str, str]  # (importing package, imported package)
Site = str  # "src/npcmind/x/y.py:12"


def _package(module: str) -> str:
    """The layer unit of a dotted module name inside npcmind: its first part below npcmind."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The absolute module names one import statement reaches (``from npcmind import answer`` reaches
    npcmind.answer, not npcmind's own __init__)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    if base == "npcmind":
        return [
            f"npcmind.{a.name}" if (SRC / a.name).is_dir() or (SRC / f"{a.name}.py").exists() else "npcmind"
            for a in node.names
        ]
    return [base]


@cache
def _statements() -> list[tuple[str, Site, ast.Import | ast.ImportFrom, list[str]]]:
    """Every import statement of npcmind: the importing module, where, the statement and what it reaches."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                site = f"{path.relative_to(SRC.parents[1])}:{node.lineno}"
                out.append((module, site, node, _targets(node, module, path.name == "__init__.py")))
    return out


def imports() -> tuple[dict[Edge, list[Site]], dict[tuple[str, str], list[Site]]]:
    """Every package edge inside npcmind and every import of a boundary library, each with where it is made."""
    inside: dict[Edge, list[Site]] = defaultdict(list)
    outside: dict[tuple[str, str], list[Site]] = defaultdict(list)
    for module, site, _, targets in _statements():
        source = _package(module)
        for target in targets:
            top = target.split(".")[0]
            if top == "npcmind" and _package(target) != source:
                inside[(source, _package(target))].append(site)
            elif top in BOUNDARIES:
                outside[(source, top)].append(site)
    return inside, outside


def module_edges() -> dict[Edge, Site]:
    """Every module-to-module import inside npcmind (``from npcmind.x import y`` reaches the module x.y when y is
    one), with the first place it is made."""
    known = {_module_name(p) for p in SRC.rglob("*.py")}
    edges: dict[Edge, Site] = {}
    for module, site, node, targets in _statements():
        names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else [""]
        for dest in sorted({f"{t}.{n}" if f"{t}.{n}" in known else t for t in targets for n in names}):
            if dest in known and dest != module:
                edges.setdefault((module, dest), site)
    return edges


def test_every_package_has_a_layer() -> None:
    """A new package is placed on purpose, and a layer entry names a package that exists."""
    found = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    found |= {p.stem for p in SRC.glob("*.py")}
    unplaced, gone = sorted(found - RANK.keys()), sorted(RANK.keys() - found)
    assert not unplaced, f"place these in LAYERS (and in docs/architecture.md): {unplaced}"
    assert not gone, f"LAYERS names packages that do not exist: {gone}"


def test_imports_point_down_the_layers() -> None:
    """Every package edge goes to a lower layer; the message names the file:line of each offending import."""
    inside, _ = imports()
    wrong = [
        f"{site}: {a} -> {b} ({a} is layer {RANK[a]}, {b} is layer {RANK[b]}: "
        f"{'same layer' if RANK[a] == RANK[b] else 'upward'})"
        for (a, b), sites in sorted(inside.items())
        if a in RANK and b in RANK and RANK[b] >= RANK[a]
        for site in sites
    ]
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def test_boundary_libraries_stay_in_their_packages() -> None:
    """The web framework, the model client, the database drivers and metrics stay where their layer is."""
    _, outside = imports()
    wrong = [
        f"{site}: {pkg} imports {lib} (only {', '.join(BOUNDARIES[lib])} may)"
        for (pkg, lib), sites in sorted(outside.items())
        if pkg not in BOUNDARIES[lib]
        for site in sites
    ]
    assert not wrong, "\n".join(wrong)


def cycle(edges: set[Edge]) -> list[str] | None:
    """One cycle of the graph as the list of its nodes (first repeated at the end), or None."""
    graph: dict[str, list[str]] = defaultdict(list)
    for a, b in sorted(edges):
        graph[a].append(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_no_package_cycle() -> None:
    """Whatever LAYERS says, the real package graph has no cycle; the message names each edge's first import."""
    inside, _ = imports()
    found = cycle(set(inside))
    hops = [f"{a} -> {b} ({inside[(a, b)][0]})" for a, b in itertools.pairwise(found)] if found else []
    assert found is None, "package cycle:\n" + "\n".join(hops)


def test_no_module_cycle() -> None:
    """No two modules import each other, even through others or inside functions: each module can be read and
    loaded after those it imports."""
    edges = module_edges()
    found = cycle(set(edges))
    hops = [f"{a} -> {b} ({edges[(a, b)]})" for a, b in itertools.pairwise(found)] if found else []
    assert found is None, "module cycle:\n" + "\n".join(hops)


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({("a", "b"), ("b", "c")}, None),
        ({("a", "b"), ("b", "c"), ("c", "a")}, ["a", "b", "c", "a"]),
        ({("x", "a"), ("a", "b"), ("b", "a")}, ["a", "b", "a"]),
    ],
)
def test_cycle_finder(edges: set[Edge], expected: list[str] | None) -> None:
    """The cycle check itself finds a cycle, and only a real one."""
    assert cycle(edges) == expected


def test_relative_and_package_imports_resolve() -> None:
    """``from npcmind import protocol`` is an edge to protocol, a relative import is resolved from its module."""
    tree = ast.parse("from npcmind import protocol, A2G_VERSION\nfrom ..protocol import a2g\nfrom . import base\n")
    nodes = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert _targets(nodes[0], "npcmind.decide.prompt", False) == ["npcmind.protocol", "npcmind"]
    assert _targets(nodes[1], "npcmind.decide.prompt", False) == ["npcmind.protocol"]
    assert _targets(nodes[2], "npcmind.providers", True) == ["npcmind.providers"]
