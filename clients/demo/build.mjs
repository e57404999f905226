// Builds the demo into the Python package (src/npcmind/demo/): one IIFE bundle and its page, so that
// `pip install npcmind` and `npcmind demo` need no Node. The bundle's first line records the digest of every
// source it was built from; tests/test_demo.py fails when the committed bundle is older than its sources.
import { createHash } from "node:crypto";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../..");
const out = resolve(process.argv[2] ?? join(root, "src/npcmind/demo")); // another folder: tests compare

/** The digest tests/test_demo.py recomputes: each file's repository path and SHA-256, in path order. */
function digest(files) {
  const h = createHash("sha256");
  for (const f of files) {
    const text = readFileSync(join(root, f)).toString("utf8").replaceAll("\r\n", "\n");
    h.update(`${f}\n${createHash("sha256").update(text, "utf8").digest("hex")}\n`);
  }
  return h.digest("hex");
}

const result = await esbuild.build({
  entryPoints: [join(here, "src/main.ts")],
  bundle: true,
  format: "iife",
  target: "es2022",
  minify: false,
  metafile: true,
  write: false,
  legalComments: "none",
});
const inputs = Object.keys(result.metafile.inputs).map((p) => relative(root, resolve(process.cwd(), p)));
const files = [...inputs, "clients/demo/index.html"].sort();
const header = `/* npcmind-demo-sources ${JSON.stringify({ sha256: digest(files), files })} */\n`;
writeFileSync(join(out, "demo.js"), header + result.outputFiles[0].text);
copyFileSync(join(here, "index.html"), join(out, "index.html"));
console.log(`built ${relative(process.cwd(), join(out, "demo.js"))} from ${files.length} sources`);
