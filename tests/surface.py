"""The SDKs' public surfaces, read from each port as it is (Python's `__all__`, the TypeScript package's exports,
C#'s public types by reflection, the C++ core's public headers through clang's AST) and compared with the one
declared in clients/surface/surface.json, so the ports cannot drift apart in silence (issue 41).
tests/test_surface.py runs it; `python tests/surface.py` prints the differences and writes the table of
clients/surface/README.md.

A surface is `{name: {"kind": ..., "members": [...]}}`; compared flat, as the set of `Type` and `Type.member`
names. The declaration's naming rule (clients/surface/README.md) derives each language's name from one canonical
name; a name that differs from the rule, and anything present in only some languages, is declared with a reason.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SURFACE = ROOT / "clients" / "surface"
DECLARED = SURFACE / "surface.json"
LANGUAGES = ("python", "typescript", "csharp", "cpp")
Surface = dict[str, dict[str, Any]]
# the declaration's keys a concept or a member may have (a language's name override is one of LANGUAGES)
CONCEPT_KEYS = {"name", "kind", "only", "reason", "members", "open", *LANGUAGES}
MEMBER_KEYS = {"name", "const", "only", "reason", *LANGUAGES}
KINDS = {"type", "error", "function", "constant"}


# --- reading each port --------------------------------------------------------------------------------------------


def python_surface(package: str = "npcmind_client") -> Surface:
    """The Python SDK's surface, in this process: `__all__`, and each class's public members (its own and those
    of its bases in the package: attributes, methods, properties, dataclass fields, what `__init__` sets)."""
    module = __import__(package)
    out: Surface = {}
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj):
            out[name] = {"kind": "class", "members": sorted(class_members(obj, package))}
        else:
            out[name] = {"kind": "function" if callable(obj) else "constant", "members": []}
    return out


def class_members(cls: type, package: str) -> set[str]:
    """The public names a user of `cls` reaches: from the classes of its MRO that belong to the package."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith(package):
            continue
        names.update(vars(klass))
        names.update(vars(klass).get("__annotations__", {}))
        names.update(init_attributes(klass))
    return {n for n in names if not n.startswith("_")}


def init_attributes(klass: type) -> set[str]:
    """The attributes `__init__` (or `__post_init__`) sets on `self`: public by name, invisible on the class."""
    found: set[str] = set()
    for method in ("__init__", "__post_init__"):
        function = vars(klass).get(method)
        if function is None or not inspect.isfunction(function):
            continue
        try:
            source = inspect.getsource(function)
        except OSError:  # made by @dataclass: its fields are the class's annotations
            continue
        tree = ast.parse(textwrap.dedent(source))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        found.add(t.attr)
    return found


def read_python(src: Path, package: str = "npcmind_client") -> Surface:
    """The surface of the Python package under `src`, read in a process of its own (so a copy is read as is)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    r = subprocess.run(
        [sys.executable, __file__, "python", package], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 0, f"the Python reader failed:\n{r.stderr[-3000:]}"
    surface: Surface = json.loads(r.stdout)
    return surface


def read_typescript(package: Path) -> Surface:
    """The TypeScript package's exports (src/index.ts) and their members, read by its own compiler's API."""
    r = subprocess.run(
        ["node", str(SURFACE / "read-typescript.mjs"), str(package)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, f"the TypeScript reader failed:\n{r.stderr[-3000:]}"
    surface: Surface = json.loads(r.stdout)
    return surface


def read_csharp(package: Path, out: Path) -> Surface:
    """The C# package built by its Build~/build.sh into `out`, its public types read by reflection (ReadCsharp.cs)."""
    env = {**os.environ, "NPCMIND_CSHARP_OUT": str(out)}
    r = subprocess.run(
        [str(package / "Build~" / "build.sh"), "build"], capture_output=True, text=True, timeout=600, env=env
    )
    assert r.returncode == 0, f"build.sh build failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    reader = out / "ReadCsharp.exe"
    compiled = subprocess.run(
        ["mcs", "-langversion:7", "-nologo", f"-out:{reader}", str(SURFACE / "ReadCsharp.cs")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assemblies = [str(out / name) for name in ("NpcMind.Runtime.dll", "NpcMind.Unity.dll") if (out / name).exists()]
    r = subprocess.run(["mono", str(reader), *assemblies], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"the C# reader failed:\n{r.stderr[-3000:]}"
    surface: Surface = json.loads(r.stdout)
    return surface


CPP_HEADERS = Path("Source") / "NpcMindCore" / "Public"  # of clients/unreal: the core's public headers


def read_cpp(plugin: Path) -> Surface:
    """The C++ core's surface: what its public headers declare in namespace `npcmind`, read from clang's AST
    (`-ast-dump=json`) of a file including each of them. A class's public members (access followed through its
    `public:`/`private:`), an enum's values; a nested type is `Outer.Inner`; operators and constructors left out."""
    include = plugin / CPP_HEADERS
    headers = sorted(p.relative_to(include).as_posix() for p in include.rglob("*.h"))
    r = subprocess.run(
        [
            "clang++",
            "-std=c++17",
            "-fsyntax-only",
            "-x",
            "c++",
            f"-I{include}",
            "-",
            "-Xclang",
            "-ast-dump=json",
            "-Xclang",
            "-ast-dump-filter",
            "-Xclang",
            "npcmind",
        ],
        input="".join(f'#include "{h}"\n' for h in headers),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, f"clang++ failed on the headers:\n{r.stderr[-3000:]}"
    out: Surface = {}
    for node in clang_nodes(r.stdout):
        if node.get("kind") == "NamespaceDecl" and node.get("name") == "npcmind":
            for child in node.get("inner", []):
                cpp_decl(child, "", out)
    return out


def clang_nodes(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of clang's filtered AST dump, one after another (each after a `Dumping ...:` line)."""
    decoder = json.JSONDecoder()
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return
        if text.startswith("Dumping", at):
            at = text.index("\n", at)
            continue
        node, at = decoder.raw_decode(text, at)
        yield node


def cpp_decl(node: dict[str, Any], outer: str, out: Surface) -> None:
    """One declaration of the namespace (or a public one nested in a class) into the surface."""
    kind, name = node.get("kind", ""), node.get("name", "")
    if node.get("isImplicit") or not name:
        return
    full = f"{outer}.{name}" if outer else name
    if kind == "CXXRecordDecl" and node.get("completeDefinition"):
        out[full] = {"kind": "class", "members": sorted(cpp_members(node, full, out))}
    elif kind == "ClassTemplateDecl":
        for inner in node.get("inner", []):
            cpp_decl({**inner, "name": name}, outer, out)
    elif kind == "EnumDecl":
        values = [c["name"] for c in node.get("inner", []) if c.get("kind") == "EnumConstantDecl"]
        out[full] = {"kind": "enum", "members": sorted(values)}
    elif kind in ("TypeAliasDecl", "TypedefDecl"):
        out.setdefault(full, {"kind": "type", "members": []})
    elif kind in ("FunctionDecl", "FunctionTemplateDecl") and not outer:
        out.setdefault(full, {"kind": "function", "members": []})
    elif kind == "VarDecl" and not outer:
        out.setdefault(full, {"kind": "constant", "members": []})


def cpp_members(record: dict[str, Any], full: str, out: Surface) -> set[str]:
    """A class's public members by name; its public nested types go into the surface as types of their own."""
    public = record.get("tagUsed") != "class"
    names: set[str] = set()
    for child in record.get("inner", []):
        kind = child.get("kind", "")
        if kind == "AccessSpecDecl":
            public = child.get("access") == "public"
        elif not public or child.get("isImplicit"):
            continue
        elif kind in ("CXXMethodDecl", "FieldDecl", "VarDecl", "FunctionTemplateDecl"):
            if not child.get("name", "operator").startswith("operator"):
                names.add(child["name"])
        elif kind in ("CXXRecordDecl", "EnumDecl", "TypeAliasDecl", "TypedefDecl", "ClassTemplateDecl"):
            cpp_decl(child, full, out)
    return names


# --- the declaration ----------------------------------------------------------------------------------------------


def words(canonical: str) -> list[str]:
    """A canonical (snake_case) name's words."""
    return [w for w in canonical.split("_") if w]


def styled(canonical: str, language: str, *, const: bool = False) -> str:
    """A member's or a function's name in a language: snake_case, camelCase, PascalCase in C# and C++ (a constant:
    UPPER_SNAKE in Python and TypeScript, PascalCase in C# and C++)."""
    ws = words(canonical)
    if language in ("csharp", "cpp"):
        return "".join(w[:1].upper() + w[1:] for w in ws)
    if const:
        return "_".join(w.upper() for w in ws)
    if language == "python":
        return "_".join(ws)
    return ws[0] + "".join(w[:1].upper() + w[1:] for w in ws[1:])


def concept_name(concept: dict[str, Any], language: str) -> str:
    """A concept's flat name in a language: its override, else the rule of its kind."""
    if language in concept:
        return str(concept[language])
    kind = concept.get("kind", "type")
    name: str = concept["name"]
    if kind == "function":
        return styled(name, language)
    if kind == "constant":
        return styled(name, language, const=True)
    if kind == "error" and language == "csharp":
        return re.sub(r"Error$", "Exception", name)
    return name


def member_name(member: dict[str, Any], language: str) -> str:
    """A member's name in a language: its override, else the rule."""
    if language in member:
        return str(member[language])
    return styled(member["name"], language, const=bool(member.get("const")))


def as_member(member: str | dict[str, Any]) -> dict[str, Any]:
    """A member given as its canonical name alone, or as an object."""
    return {"name": member} if isinstance(member, str) else member


def present(entry: dict[str, Any], within: tuple[str, ...] = LANGUAGES) -> tuple[str, ...]:
    """The languages an entry is in: its `only`, within those of the concept holding it."""
    only = entry.get("only")
    return tuple(lang for lang in within if only is None or lang in only)


def declared(declaration: dict[str, Any], language: str) -> Iterator[tuple[str, str]]:
    """Every flat name the declaration gives a language, with the concept (and member) that declares it."""
    for concept in declaration["concepts"]:
        langs = present(concept)
        if language not in langs:
            continue
        top = concept_name(concept, language)
        yield top, concept["name"]
        for member in map(as_member, concept.get("members", [])):
            if language in present(member, langs):
                yield f"{top}.{member_name(member, language)}", f"{concept['name']}.{member['name']}"


def expected(declaration: dict[str, Any], language: str) -> dict[str, str]:
    """Every flat name the declaration gives a language -> the concept (and member) that declares it."""
    return dict(declared(declaration, language))


def flat(surface: Surface) -> set[str]:
    """A surface as the set of its `Type` and `Type.member` names."""
    return {name for t, entry in surface.items() for name in (t, *(f"{t}.{m}" for m in entry["members"]))}


def compared(declaration: dict[str, Any], language: str, surface: Surface) -> tuple[dict[str, str], set[str]]:
    """What the declaration gives a language (name -> where declared), and the names its port has to compare."""
    # an open concept (generated wire types) is compared by its name alone, not by its members
    opened = {concept_name(c, language) for c in declaration["concepts"] if c.get("open")}
    have = {n for n in flat(surface) if n.partition(".")[0] not in opened or "." not in n}
    return expected(declaration, language), have


def differences(declaration: dict[str, Any], language: str, surface: Surface) -> list[str]:
    """Each difference between a port's real surface and the declared one, as a line naming language and name."""
    want, have = compared(declaration, language, surface)
    lines = [f"{language}: {n} is public in the SDK but not declared in surface.json" for n in sorted(have - set(want))]
    lines += [
        f"{language}: {n} is declared in surface.json (concept {want[n]}) but not in the SDK"
        for n in sorted(set(want) - have)
    ]
    return lines


def problems(declaration: dict[str, Any]) -> list[str]:
    """What is wrong with the declaration itself: unknown keys, a difference without its reason, a name twice."""
    found: list[str] = []
    reasons = declaration.get("reasons", {})
    for entry, where, keys in entries(declaration):
        found += [f"{where}: unknown key {k!r}" for k in sorted(set(entry) - keys)]
        if entry.get("only") is not None and not set(entry["only"]) <= set(LANGUAGES):
            found.append(f"{where}: `only` names an unknown language")
        renamed = [lang for lang in LANGUAGES if lang in entry]
        if (entry.get("only") is not None or renamed or entry.get("open")) and not reason_of(entry, reasons):
            found.append(
                f"{where}: differs between the languages ({'only' if 'only' in entry else 'a name'}) "
                "without a `reason` (non-empty, or @key of `reasons`)"
            )
        if entry.get("kind", "type") not in KINDS:
            found.append(f"{where}: kind must be one of {sorted(KINDS)}")
    for concept in declaration["concepts"]:
        for member in map(as_member, concept.get("members", [])):
            if not set(member.get("only") or ()) <= set(present(concept)):
                found.append(f"{concept['name']}.{member['name']}: `only` names a language its concept is not in")
    used = {key[1:] for entry, _, _ in entries(declaration) for key in str(entry.get("reason", "")).split()}
    found += [f"reasons: {key!r} explains nothing" for key in reasons if key not in used]
    for language in LANGUAGES:
        seen: dict[str, int] = {}
        for name, _ in declared(declaration, language):
            seen[name] = seen.get(name, 0) + 1
        found += [f"{language}: {n} is declared {k} times" for n, k in seen.items() if k > 1]
    return found


def entries(declaration: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str, set[str]]]:
    """Every concept and member of the declaration, with where it is (for messages) and the keys it may have."""
    for concept in declaration["concepts"]:
        yield concept, concept["name"], CONCEPT_KEYS
        for member in map(as_member, concept.get("members", [])):
            yield member, f"{concept['name']}.{member['name']}", MEMBER_KEYS


def reason_of(entry: dict[str, Any], reasons: dict[str, str]) -> str:
    """An entry's reason, `@key`s resolved through the declaration's `reasons`; none while it says TODO (what
    `surface.py sync` writes for a person to replace)."""
    reason = str(entry.get("reason", "")).strip()
    if reason.startswith("@"):  # one or more keys, `@a @b`: each must be one of `reasons`
        texts = [reasons.get(key[1:], "").strip() if key.startswith("@") else "" for key in reason.split()]
        reason = "; ".join(texts) if all(texts) else ""
    return "" if reason.startswith("TODO") else reason


def load(path: Path = DECLARED) -> dict[str, Any]:
    """The declaration."""
    declaration: dict[str, Any] = json.loads(path.read_text())
    return declaration


# --- the table of clients/surface/README.md -----------------------------------------------------------------------

BEGIN = "<!-- the table below is written by `python tests/surface.py` from surface.json: do not edit it -->"
END = "<!-- end of the written table -->"


def table(declaration: dict[str, Any]) -> str:
    """The declared surface as Markdown: a row a concept (its name in each language, its members, what differs,
    grouped by reason), then the reasons with how many names each explains."""
    reasons = declaration.get("reasons", {})
    counts: dict[str, int] = {}
    rows = [
        "| concept | Python | TypeScript | C# | C++ | members | differs (reason) |",
        "|---|---|---|---|---|---|---|",
    ]
    for concept in declaration["concepts"]:
        langs = present(concept)
        cells = [f"`{concept_name(concept, lang)}`" if lang in langs else "—" for lang in LANGUAGES]
        members = list(map(as_member, concept.get("members", [])))
        groups: dict[str, list[str]] = {}
        if differs(concept, LANGUAGES):
            groups.setdefault(label(concept, reasons), []).append("the type")
        for member in members:
            if differs(member, langs):
                only = present(member, langs)
                where = "" if only == langs else f" ({', '.join(SHORT[lang] for lang in only)})"
                groups.setdefault(label(member, reasons), []).append(f"`{member['name']}`{where}")
        for key, names in groups.items():
            for one in key.split(" ") if key.startswith("`") else [key]:
                counts[one] = counts.get(one, 0) + len(names)
        notes = "<br>".join(f"{', '.join(names)}: {key}" for key, names in groups.items())
        rows.append(f"| `{concept['name']}` | {' | '.join(cells)} | {len(members)} | {notes} |")
    rows += ["", "Reasons (`@key` in surface.json; how many entries each explains):", ""]
    rows += [f"- `{key}` ({counts.get(f'`{key}`', 0)}): {text}" for key, text in reasons.items()]
    inline = sorted(k for k in counts if not k.startswith("`"))
    rows += [f"- {key} ({counts[key]})" for key in inline]
    return "\n".join(rows)


SHORT = {"python": "Py", "typescript": "TS", "csharp": "C#", "cpp": "C++"}


def differs(entry: dict[str, Any], within: tuple[str, ...]) -> bool:
    """Whether an entry is not the same in every language it could be in: fewer of them, a name of its own, open."""
    return present(entry, within) != within or any(lang in entry for lang in LANGUAGES) or bool(entry.get("open"))


def label(entry: dict[str, Any], reasons: dict[str, str]) -> str:
    """How the table names an entry's reason: its key in `reasons`, or the reason's text."""
    reason = str(entry.get("reason", "")).strip()
    return " ".join(f"`{key[1:]}`" for key in reason.split()) if reason.startswith("@") else reason_of(entry, reasons)


def with_table(readme: str, declaration: dict[str, Any]) -> str:
    """The README with its written table replaced by the one of this declaration."""
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{table(declaration)}\n\n{END}{tail}"


def surfaces() -> dict[str, Surface]:
    """The four ports of this checkout, read."""
    with tempfile.TemporaryDirectory(prefix="npcmind-surface-") as out:
        return {
            "python": read_python(ROOT / "clients" / "python" / "src"),
            "typescript": read_typescript(ROOT / "clients" / "typescript"),
            "csharp": read_csharp(ROOT / "clients" / "csharp", Path(out)),
            "cpp": read_cpp(ROOT / "clients" / "unreal"),
        }


def main(argv: list[str]) -> int:
    """`surface.py python <package>`: print that package's surface (the Python reader's process);
    `surface.py`: write the README's table and print every difference of the four ports;
    `surface.py sync`: first rewrite surface.json to the ports as they are (tests/surface_edit.py), a reason to
    write for each entry it changed."""
    if argv[:1] == ["python"]:
        print(json.dumps(python_surface(argv[1]), indent=1))
        return 0
    read = surfaces()
    if argv[:1] == ["sync"]:
        from surface_edit import dumps, synced

        declaration = load()
        for language, surface in read.items():
            declaration = synced(declaration, language, surface)
        DECLARED.write_text(dumps(declaration))
    declaration = load()
    readme = SURFACE / "README.md"
    readme.write_text(with_table(readme.read_text(), declaration))
    found = problems(declaration)
    for language, surface in read.items():
        found += differences(declaration, language, surface)
    print("\n".join(found) or "the four ports' surfaces are the declared one")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
