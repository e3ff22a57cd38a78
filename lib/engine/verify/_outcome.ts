/**
 * What the final check's rounds decide, recorded: verdicts (`settle`: equal ranges proven, others
 * listed again, or failed, or `unproven` in a crawl done before), what the check waits for, and
 * the crawl moved to `done` with a verification that says exactly what was checked
 * (`provenExact`).
 *
 * @module
 */
import type { LearnedCaps } from "../../plan/source.ts";
import { transition } from "../crawl/mod.ts";
import { applyWindow } from "./_pass_feed.ts";
import type { Pass, PassSettings } from "./_pass.ts";
import {
  commitRelist,
  commitShard,
  type CrawlRecord,
  getCrawl,
  keys,
  relisted,
  type ShardRecord,
  updateRecord,
  type Verification,
} from "../store/mod.ts";
import { completenessError, MAX_RELISTS, type RangeVerdict } from "./_verdicts.ts";

/**
 * The crawl is done: every one of its `ranges` was proven at `at` (or decided `unproven`, in a
 * crawl done before). What the verification says is what was checked: `exact` with the feed;
 * `counts` when the feed could not be read and the registry changed since the crawl started (its
 * revisions may be stale); `unproven` naming the ranges that still disagree. The changes the last
 * round read after `at` are applied first (`applyWindow`), and said.
 */
export async function provenExact(pass: Pass, ranges: number, at: string | null): Promise<void> {
  await pass.checkUnchanged?.();
  const window = await applyWindow(pass);
  const crawl = (await getCrawl(pass.kv, pass.id)).value;
  const stillAt = pass.feedLost && crawl?.startSeq
    ? await pass.source.updateSeq().catch(() => null)
    : null;
  const unchanged = stillAt !== null && stillAt === crawl?.startSeq;
  const where = at === null
    ? pass.feedLost
      ? unchanged
        ? ` (${pass.driftError}; its update_seq held at ${stillAt} since the crawl started)`
        : ` (${pass.driftError}, and the registry changed since the crawl started: revisions ` +
          "changed meanwhile may be stale; following catches them up)"
      : " (no change feed: counted as it stood)"
    : ` at seq ${at}`;
  const resynced = pass.resynced
    ? `; its feed did not know seq ${pass.resynced.from}, so it was taken up again at ` +
      `${pass.resynced.to} and every row compared (${pass.resynced.compared} rows, ` +
      `${pass.resynced.repaired} repaired)`
    : "";
  const newer = window.applied > 0
    ? `, and the ${window.applied} changes read after it applied too (to seq ${window.to})`
    : "";
  const unproven = [...pass.unproven.values()];
  const status = unproven.length > 0
    ? "unproven"
    : pass.feedLost && !unchanged
    ? "counts"
    : "exact";
  const detail = status === "unproven"
    ? `${unproven.length} of ${ranges} ranges could not be proven: ${unproven.join("; ")}; ` +
      `the others hold what the registry lists there${where}`
    : status === "counts"
    ? `every one of ${ranges} ranges holds as many items as the registry lists there${where}`
    : `every one of ${ranges} ranges holds what the registry lists there${where}`;
  await done(pass.kv, pass.id, pass.o, {
    verification: {
      status,
      detail: detail + newer + resynced +
        (pass.applied > 0 ? `, after ${pass.applied} changes applied` : ""),
    },
    driftError: pass.driftError,
    learned: pass.source.learned,
  });
}

/**
 * Records verdicts: equal ranges are marked proven (their relists forgotten: a range listed again
 * that then held is repaired, not used up), disagreeing ones listed again. Past
 * {@linkcode MAX_RELISTS} relists that did not make it hold, a range fails the crawl, or, in a crawl
 * that was done before (a repair while it is followed: its copy is kept), is marked `unproven` with
 * why (`unproven` gets it) and tried again later. Returns how many ranges are listed again.
 */
export async function settle(
  kv: Deno.Kv,
  id: string,
  todo: Deno.KvEntry<ShardRecord>[],
  verdicts: RangeVerdict[],
  o: Omit<PassSettings, "dispatcher"> & {
    /** Where ranges listed again go. @default none: ranges equal or stuck are only marked */
    dispatcher?: PassSettings["dispatcher"];
    at: string | null;
    view?: boolean;
    unproven?: Map<number, string>;
    keepDone?: boolean;
  },
): Promise<number> {
  let relists = 0;
  for (const v of verdicts) {
    const entry = todo.find((e) => e.value.id === v.id)!;
    const shard = entry.value;
    if (v.verdict === "equal") {
      if (shard.verified !== "exact" || (shard.relists ?? 0) > 0) {
        await commitShard(kv, id, entry, {
          ...shard,
          verified: "exact",
          relists: 0,
          unproven: null,
        });
      }
      o.unproven?.delete(shard.id);
    } else if (v.verdict === "mismatch") {
      const relistsSoFar = shard.relists ?? 0;
      if (relistsSoFar >= MAX_RELISTS) {
        const err = completenessError({ ...shard, relists: relistsSoFar, view: o.view }, v, o.at);
        if (!o.keepDone) throw err;
        const why = err.message;
        o.unproven?.set(shard.id, why);
        if (shard.verified !== "unproven" || shard.unproven !== why) {
          await commitShard(kv, id, entry, { ...shard, verified: "unproven", unproven: why });
        }
        continue;
      }
      const next = relisted(shard, o.clock.now(), null);
      if (await commitRelist(kv, id, entry, next)) {
        relists++;
        await o.dispatcher?.dispatch(id, shard.id);
      }
    }
  }
  return relists;
}

/** Notes on the crawl what the final check waits for (the status shows it). */
export function notePending(kv: Deno.Kv, id: string, detail: string): Promise<void> {
  return noteVerification(kv, id, "running", { status: "pending", detail });
}

/**
 * Records how a crawl in `status` is verified now (nothing when it is in another state, or
 * `replaces` says its current verification stays).
 */
export async function noteVerification(
  kv: Deno.Kv,
  id: string,
  status: CrawlRecord["status"],
  verification: Verification,
  replaces: (current: Verification | undefined) => boolean = () => true,
): Promise<void> {
  await updateRecord<CrawlRecord>(
    kv,
    keys.crawl(id),
    (cur) =>
      cur?.status === status && replaces(cur.verification) ? { ...cur, verification } : undefined,
  );
}

/**
 * Moves the crawl to `done` with how it was proven, why its feed could not be used (if so) and
 * what its registry was seen to serve (remembered for the sources that read it later).
 */
export async function done(
  kv: Deno.Kv,
  id: string,
  o: PassSettings,
  end: { verification?: Verification; driftError?: string; learned?: Readonly<LearnedCaps> } = {},
): Promise<boolean> {
  let mine = false;
  const { verification, driftError, learned } = end;
  await transition(kv, id, "done", (s) => mine = s === "running", {
    clock: o.clock,
    patch: {
      ...(verification ? { verification } : {}),
      // A pass that read its feed clears what an earlier one could not.
      driftError,
      ...(learned ? { learned: { ...learned } } : {}),
    },
  });
  if (mine) o.onFinished?.();
  return true;
}
