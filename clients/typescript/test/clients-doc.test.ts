// docs/clients.md's TypeScript example is examples/usage.ts (which tsc type-checks), so the page cannot rot.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8");

test("docs/clients.md's TypeScript block is examples/usage.ts without its first comment line", () => {
  const block = /```ts\n([\s\S]*?)```/.exec(read("../../../docs/clients.md"))?.[1];
  const example = read("../examples/usage.ts").split("\n").slice(1).join("\n");
  assert.equal(block, example);
});
