/**
 * The live display in a real terminal (tmux, which keeps what scrolls off in its history): a
 * 56-shard crawl with documents drawn at 80x24 and at 160x40 leaves one drawing, not a stack of
 * stale ones, and no row wider than the terminal; after Ctrl-C the line that says how to resume is
 * on screen below it. CI installs tmux (.ci/run).
 */
import assert from "node:assert/strict";
import { haveTmux, TMUX } from "../optional_tools.ts";
import { spawnRegistry, taskArgs } from "../helpers.ts";

async function tmux(...args: string[]): Promise<string> {
  const out = await new Deno.Command(TMUX, { args, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) throw new Error(`tmux ${args[0]}: ${new TextDecoder().decode(out.stderr)}`);
  return new TextDecoder().decode(out.stdout);
}

for (const [columns, rows, interrupt] of [[80, 24, true], [160, 40, false]] as const) {
  Deno.test({
    name:
      `live display: 56 shards with documents in tmux at ${columns}x${rows}: one drawing, rows within the width` +
      (interrupt ? ", the resume line after Ctrl-C" : ", the summary below it"),
    ignore: !haveTmux,
    fn: async () => {
      const reg = await spawnRegistry([
        ...["--synthetic", "5000", "--latency-ms", "20", "--doc-latency-ms", "5"],
        ...["--no-include-docs", "--no-bulk-get", "--fault-rate", "0.01"],
      ]);
      const dir = await Deno.makeTempDir();
      const session = `rankcrawl-live-${columns}-${Deno.pid}`;
      const socket = `${dir}/tmux.sock`;
      const command = [
        Deno.execPath(),
        ...taskArgs("crawl"),
        ...["--source", reg.url, "--kv", `${dir}/c.kv`, "--shards", "56", "--docs"],
      ].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
      try {
        await tmux(
          "-S",
          socket,
          "new-session",
          "-d",
          "-s",
          session,
          "-x",
          String(columns),
          "-y",
          String(rows),
          `${command}; echo "[exit $?]"; sleep 600`,
        );
        const pane = `${session}:0.0`;
        const cap = () => tmux("-S", socket, "capture-pane", "-p", "-J", "-S", "-", "-t", pane);
        const until = async (what: string, ok: (text: string) => boolean, ms = 180_000) => {
          const deadline = Date.now() + ms;
          for (;;) {
            const text = await cap();
            if (ok(text)) return text;
            if (Date.now() > deadline) throw new Error(`no ${what} in:\n${text}`);
            await new Promise((r) => setTimeout(r, 250));
          }
        };
        await until("drawing", (t) => / running: /.test(t));
        if (interrupt) {
          await new Promise((r) => setTimeout(r, 1500));
          await tmux("-S", socket, "send-keys", "-t", pane, "C-c");
        }
        const text = await until("exit", (t) => /\[exit \d+\]/.test(t));
        const lines = text.split("\n");
        const heads = lines.filter((l) => /^\S+ (planning|running|done): /.test(l));
        assert.equal(heads.length, 1, `one drawing, not ${heads.length}:\n${text}`);
        // Rows of the drawing never wrap (log lines may: -J joins what wrapped, so a drawing row
        // that wrapped is one line wider than the terminal).
        const drawn = lines.filter((l) =>
          /^\S+ (planning|running|done): |^ {2}pace: |^ +\d+ [█░]|^ {2}… [\d,]+ more shards/.test(l)
        );
        assert.ok(drawn.length > 1, text);
        const wide = drawn.filter((l) => [...l].length >= columns);
        assert.deepEqual(wide, [], "no drawn row as wide as the terminal");
        const end = lines.findLastIndex((l) => /\[exit \d+\]/.test(l));
        if (interrupt) {
          assert.match(text, /\[exit 130\]/);
          // The terminal itself echoes the key as "^C" where the cursor stands.
          assert.match(
            lines[end - 1],
            /^(\^C)?crawl \S+ stopped: its shards are let go; the same command resumes it$/,
          );
        } else {
          assert.match(text, /\[exit 0\]/);
          assert.match(text, /checked: exact/);
          assert.ok(lines.indexOf(heads[0]) < lines.findIndex((l) => /^crawl \S+ done: /.test(l)));
        }
      } finally {
        await tmux("-S", socket, "kill-server").catch(() => "");
        await reg.close();
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
