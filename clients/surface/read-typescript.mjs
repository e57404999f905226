// The TypeScript SDK's public surface, as tests/test_surface.py compares it with surface.json: every name the
// package's entry (src/index.ts) exports, its kind, and for a class or an object type its public members (a
// class's static ones too). Read with the package's own TypeScript compiler (its devDependency), from the sources:
// no build needed. Usage: node read-typescript.mjs <package folder> -> JSON on stdout.
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const pkg = resolve(process.argv[2] ?? ".");
const ts = createRequire(join(pkg, "package.json"))("typescript");
const entry = join(pkg, "src", "index.ts");
const program = ts.createProgram([entry], {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  types: [],
  lib: ["lib.es2022.d.ts", "lib.dom.d.ts"],
});
const checker = program.getTypeChecker();
const source = program.getSourceFile(entry);
if (!source) throw new Error(`no ${entry}`);
// an override (an Error's `name`) belongs to the base type's surface, as C#'s reader leaves out object's overrides
const hidden = ts.ModifierFlags.Private | ts.ModifierFlags.Protected | ts.ModifierFlags.Override;

const own = join(pkg, "src");

/** Whether a member is part of the package's public surface: declared in its sources (not inherited from a type
 * of the language, as an Error's `message` and `stack`), and not private, protected, #private or an override. */
function isPublic(symbol) {
  const declaration = symbol.valueDeclaration ?? symbol.declarations?.[0];
  if (!declaration) return true;
  if (!symbol.declarations.some((d) => resolve(d.getSourceFile().fileName).startsWith(own))) return false;
  if (declaration.name && ts.isPrivateIdentifier(declaration.name)) return false;
  return (ts.getCombinedModifierFlags(declaration) & hidden) === 0;
}

/** The public member names of a type (properties and methods), sorted. */
function membersOf(type) {
  return checker.getPropertiesOfType(type).filter(isPublic).map((s) => s.getName()).filter((n) => !n.startsWith("__"));
}

function kindOf(symbol) {
  const f = symbol.getFlags();
  if (f & ts.SymbolFlags.Class) return "class";
  if (f & ts.SymbolFlags.Interface) return "interface";
  if (f & ts.SymbolFlags.Enum) return "enum";
  if (f & ts.SymbolFlags.Function) return "function";
  if (f & ts.SymbolFlags.TypeAlias) return "type";
  if (f & ts.SymbolFlags.Variable) return "constant";
  return "other";
}

const out = {};
for (const exported of checker.getExportsOfModule(checker.getSymbolAtLocation(source))) {
  const symbol = exported.getFlags() & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
  const kind = kindOf(symbol);
  let members = [];
  if (kind === "class") {
    const statics = checker.getTypeOfSymbolAtLocation(symbol, source);
    const staticNames = membersOf(statics).filter((n) => n !== "prototype");
    members = [...membersOf(checker.getDeclaredTypeOfSymbol(symbol)), ...staticNames];
  } else if (kind === "interface" || kind === "enum") {
    members = kind === "enum" ? [...(symbol.exports?.keys() ?? [])] : membersOf(checker.getDeclaredTypeOfSymbol(symbol));
  } else if (kind === "type") {
    const type = checker.getDeclaredTypeOfSymbol(symbol);
    // an object type's fields are members; a union of strings (an outcome) or a function type has none
    if (type.flags & ts.TypeFlags.Object && !type.getCallSignatures().length) members = membersOf(type);
  }
  out[exported.getName()] = { kind, members: [...new Set(members)].sort() };
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
