/**
 * The README is the front door, and docs/ holds the rest: every relative link in them points to a
 * file that exists, every page of docs/ is reachable from the README, and the README stays short.
 */
import assert from "node:assert/strict";

const root = new URL("../", import.meta.url);

/** The relative link targets of a markdown text (outside code fences). */
function links(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) continue;
    for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (!/^[a-z]+:/.test(m[1])) out.push(m[1]);
    }
  }
  return out;
}

Deno.test("docs: every relative link works, every page is linked from the README, the README is short", async () => {
  const pages = [...Deno.readDirSync(new URL("docs/", root))].filter((e) => e.name.endsWith(".md"))
    .map((e) => `docs/${e.name}`);
  assert.ok(pages.length >= 5, "docs/ holds the pages the README links to");
  const readme = await Deno.readTextFile(new URL("README.md", root));
  for (const file of ["README.md", ...pages]) {
    const text = file === "README.md" ? readme : await Deno.readTextFile(new URL(file, root));
    for (const target of links(text)) {
      const path = new URL(target.split("#")[0], new URL(file, root));
      assert.ok(
        await Deno.stat(path).then(() => true, () => false),
        `${file} links to ${target}, which does not exist`,
      );
    }
  }
  const linked = new Set(links(readme).map((l) => l.split("#")[0]));
  for (const page of pages) assert.ok(linked.has(page), `${page} is not linked from the README`);
  const lines = readme.split("\n").length;
  assert.ok(lines < 250, `README has ${lines} lines`);
});
