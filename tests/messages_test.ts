import assert from "node:assert/strict";
import { parseMessage } from "../lib/engine/messages.ts";

Deno.test("messages: well-formed messages parse; anything else is refused", () => {
  assert.deepEqual(parseMessage({ kind: "page", crawlId: "c", shardId: 3, token: 0 }), {
    kind: "page",
    crawlId: "c",
    shardId: 3,
    token: 0,
  });
  assert.deepEqual(parseMessage({ kind: "page", crawlId: "c", shardId: 3, token: 2, attempt: 1 }), {
    kind: "page",
    crawlId: "c",
    shardId: 3,
    token: 2,
    attempt: 1,
  });
  assert.deepEqual(parseMessage({ kind: "plan", crawlId: "c" }), { kind: "plan", crawlId: "c" });
  for (
    const bad of [
      null,
      "page",
      [],
      { kind: "page" },
      { kind: "page", crawlId: "", shardId: 1, token: 0 },
      { kind: "page", crawlId: "c", shardId: -1, token: 0 },
      { kind: "page", crawlId: "c", shardId: 1.5, token: 0 },
      { kind: "page", crawlId: "c", shardId: 1, token: "0" },
      { kind: "page", crawlId: "c", shardId: 1, token: 0, attempt: -2 },
      { kind: "plan" },
      { kind: "nuke", crawlId: "c" },
    ]
  ) assert.equal(parseMessage(bad), null, JSON.stringify(bad));
});
