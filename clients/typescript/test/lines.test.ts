/** Lines: a streamed answer's lines from its bytes, however the network cut them. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { Lines, MAX_LINE } from "../src/lines.js";

test("a character cut in two by a chunk comes out whole, once its line is complete", () => {
  const bytes = new TextEncoder().encode('{"action":"fuir→"}\n{"a2g"');
  const cut = bytes.indexOf(0xe2) + 1; // inside the three bytes of the arrow
  const lines = new Lines();
  assert.deepEqual(lines.feed(bytes.subarray(0, cut)), []);
  assert.ok(lines.partial);
  assert.deepEqual(lines.feed(bytes.subarray(cut)), ['{"action":"fuir→"}']);
  assert.ok(lines.partial, "the last line has not ended");
  assert.deepEqual(lines.feed(":1}\n\n  \n"), ['{"a2g":1}']); // blank lines are skipped
  assert.equal(lines.partial, false);
});

test("a line past MAX_LINE is dropped to its newline, in one chunk or many, and the next line is read", () => {
  const lines = new Lines();
  assert.deepEqual(lines.feed(`${"x".repeat(MAX_LINE + 1)}\n{"a":1}\n`), ['{"a":1}']);
  assert.equal(lines.overlong, 1);
  assert.deepEqual(lines.feed("y".repeat(MAX_LINE + 1)), []); // no newline coming soon: none of it kept
  assert.deepEqual(lines.feed('yyy\n{"b":2}\n'), ['{"b":2}']);
  assert.equal(lines.overlong, 2);
});
