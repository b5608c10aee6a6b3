// The module's checks for scripts/package-npm, run from inside the npm
// prefix it installed into (so that "@corral-run/corral" resolves as it
// would for a user). Exits non-zero with the reason on the first failure.
//
// Usage: node module.mjs MARKER
//   MARKER: a unique argument for the escape tree's sleeps, by which the
//   script finds what is left in /proc.

import assert from "node:assert/strict";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

import * as corral from "@corral-run/corral";
import { CorralError, corralPath, guardedStdio, run } from "@corral-run/corral";

const marker = process.argv[2];
assert.ok(marker, "usage: node module.mjs MARKER");

/** The processes whose command line is exactly `sleep MARKER`. */
function left() {
    let count = 0;
    for (const entry of fs.readdirSync("/proc")) {
        if (!/^\d+$/.test(entry)) continue;
        let cmdline;
        try {
            cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8");
        } catch {
            continue;
        }
        if (cmdline === `sleep\0${marker}\0`) count += 1;
    }
    return count;
}

// The .d.mts declares what the module exports, no more, no less.
const require = createRequire(import.meta.url);
const main = require.resolve("@corral-run/corral/package.json");
const pkg = JSON.parse(fs.readFileSync(main, "utf8"));
const types = fs.readFileSync(path.join(path.dirname(main), pkg.exports["."].types), "utf8");
const declared = [...types.matchAll(/^export (?:declare )?(?:function|class|const) (\w+)/gm)].map((m) => m[1]);
assert.deepEqual([...new Set(declared)].sort(), Object.keys(corral).sort(), "the .d.mts's values against the module's exports");
for (const name of ["RunOptions", "RunResult", "Report", "GuardOptions", "RunOutcome"]) {
    assert.match(types, new RegExp(`^export (?:interface|type) ${name}\\b`, "m"), `the .d.mts declares ${name}`);
}

// The binary is the platform package's.
assert.match(corralPath(), /node_modules\/@corral-run\/linux-x64\/bin\/corral$/);

// The command's own status and output.
let outcome = await run(["sh", "-c", "echo out; echo err >&2; exit 7"]);
assert.equal(outcome.exitStatus, 7);
assert.equal(outcome.stdout, "out\n");
assert.equal(outcome.stderr, "err\n");
assert.deepEqual(outcome.report.outcome, { kind: "exited", code: 7 });

// An escape tree under a 1 s limit: a setsid child, a double-forked one,
// and the leader; all ended, and the report read from --report-fd says so.
const before = left();
assert.equal(before, 0, `${before} processes with the marker before the run`);
outcome = await run(
    ["sh", "-c", `setsid sleep ${marker} & sh -c 'sleep ${marker} &'; sleep ${marker}`],
    { timeout: 1, killAfter: "500ms" },
);
assert.equal(outcome.exitStatus, 124, JSON.stringify(outcome));
assert.equal(outcome.report.outcome.kind, "timed_out");
assert.equal(outcome.report.exit_status, 124);
assert.ok(outcome.report.signals[0].delivered >= 4, JSON.stringify(outcome.report.signals));
assert.deepEqual(outcome.report.survivors, []);
assert.equal(left(), 0, "processes of the escape tree left in /proc");
const escapeSignals = outcome.report.signals;

// corral itself failing is a CorralError, with its status and report; a
// command that exits 127 by itself is not.
await assert.rejects(run(["corral-npm-no-such-command"]), (error) => {
    assert.ok(error instanceof CorralError, String(error));
    assert.equal(error.exitStatus, 127);
    assert.equal(error.report.outcome.kind, "spawn_failed");
    return true;
});
await assert.rejects(run(["true"], { extraArgs: ["--no-such-option"] }), (error) => {
    assert.ok(error instanceof CorralError, String(error));
    assert.equal(error.exitStatus, 125);
    assert.equal(error.report, null);
    return true;
});
outcome = await run(["sh", "-c", "exit 127"]);
assert.equal(outcome.exitStatus, 127);

// guardedStdio keeps what it does not rewrite.
const params = { command: "python3", args: ["server.py", "--flag"], env: { A: "1" }, cwd: "/", stderr: "ignore" };
const guarded = guardedStdio(params, { killAfter: 1 });
assert.deepEqual(guarded, {
    ...params,
    command: corralPath(),
    args: ["mcp", "wrap", "--kill-after", "1000ms", "--", "python3", "server.py", "--flag"],
});

console.log(JSON.stringify({ module: "ok", escape_tree_signals: escapeSignals }));
