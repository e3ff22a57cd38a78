import assert from "node:assert/strict";
import { parseMessage } from "../../../lib/engine/dispatch/_messages.ts";

Deno.test("messages: well-formed messages parse; anything else is refused", () => {
  assert.deepEqual(parseMessage({ kind: "shard", crawlId: "c", shardId: 3 }), {
    kind: "shard",
    crawlId: "c",
    shardId: 3,
  });
  // Extra fields are not carried along.
  assert.deepEqual(parseMessage({ kind: "shard", crawlId: "c", shardId: 0, token: 9 }), {
    kind: "shard",
    crawlId: "c",
    shardId: 0,
  });
  assert.deepEqual(parseMessage({ kind: "plan", crawlId: "c" }), { kind: "plan", crawlId: "c" });
  for (
    const bad of [
      null,
      "shard",
      [],
      { kind: "shard" },
      { kind: "shard", crawlId: "", shardId: 1 },
      { kind: "shard", crawlId: "c", shardId: -1 },
      { kind: "shard", crawlId: "c", shardId: 1.5 },
      { kind: "shard", crawlId: "c", shardId: "1" },
      { kind: "shard", crawlId: "x".repeat(300), shardId: 1 },
      { kind: "page", crawlId: "c", shardId: 1, token: 0 },
      { kind: "plan" },
      { kind: "nuke", crawlId: "c" },
    ]
  ) assert.equal(parseMessage(bad), null, JSON.stringify(bad));
});
