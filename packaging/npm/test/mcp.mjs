// The MCP check of scripts/package-npm, run from inside the npm prefix it
// installed into: the official TypeScript SDK's Client over its
// StdioClientTransport starts tests/mcp-peers/fixture_server.py, which
// leaves three helpers (a setsid child holding its stdout, a SIGTERM
// ignorer, a double-forked daemon: read its header), calls `echo`, and
// closes. Started with guardedStdio(params), 0 of the 4 processes are left
// after the close; started with params as they are, 3 of 4 are (the SDK
// ends only the server). Prints {"guarded_left": 0, "unguarded_left": 3}
// and exits 0 when so; the script ends the unguarded run's leftovers by
// their identities from PIDS_UNGUARDED.
//
// Usage: node mcp.mjs PYTHON FIXTURE PIDS_GUARDED PIDS_UNGUARDED

import assert from "node:assert/strict";
import fs from "node:fs";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { guardedStdio } from "@corral-run/corral";

const [python, fixture, pidsGuarded, pidsUnguarded] = process.argv.slice(2);
assert.ok(pidsUnguarded, "usage: node mcp.mjs PYTHON FIXTURE PIDS_GUARDED PIDS_UNGUARDED");

/** Whether the process named by {pid, start_time} still runs (a zombie does not). */
function alive({ pid, start_time }) {
    let stat;
    try {
        stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    } catch {
        return false;
    }
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[19]) === start_time && fields[0] !== "Z";
}

async function waitUntil(seconds, predicate) {
    const deadline = Date.now() + seconds * 1000;
    while (!predicate()) {
        if (Date.now() > deadline) return false;
        await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return true;
}

/** Connects, calls echo, closes; returns the fixture's 4 identities. */
async function session(params, pidsFile) {
    const client = new Client({ name: "corral-package-npm", version: "0.0.0" });
    await client.connect(new StdioClientTransport(params));
    const result = await client.callTool({ name: "echo", arguments: { message: "hi" } });
    assert.equal(result.content[0].text, "Echo: hi");
    const pids = JSON.parse(fs.readFileSync(pidsFile, "utf8"));
    const all = Object.values(pids);
    assert.equal(all.length, 4);
    assert.equal(all.filter(alive).length, 4, `all 4 run before the close: ${JSON.stringify(pids)}`);
    await client.close();
    return pids;
}

const server = (pidsFile) => ({
    command: python,
    args: [fixture],
    env: { CORRAL_MCP_FIXTURE_PIDS: pidsFile },
    stderr: "inherit",
});

// Guarded: the whole tree is gone once corral mcp wrap has ended it.
const guarded = await session(guardedStdio(server(pidsGuarded)), pidsGuarded);
await waitUntil(20, () => Object.values(guarded).every((id) => !alive(id)));
const guardedLeft = Object.values(guarded).filter(alive).length;

// Unguarded: the server ends (the SDK closes its stdin, then signals it);
// its three helpers stay.
const unguarded = await session(server(pidsUnguarded), pidsUnguarded);
assert.ok(await waitUntil(20, () => !alive(unguarded.server)), "the unguarded server did not end");
const unguardedLeft = Object.values(unguarded).filter(alive).length;

console.log(JSON.stringify({ guarded_left: guardedLeft, unguarded_left: unguardedLeft }));
assert.equal(guardedLeft, 0, `guarded: ${guardedLeft} of 4 processes left after the client closed`);
assert.equal(unguardedLeft, 3, `unguarded: ${unguardedLeft} of 4 left, not 3: the fixture no longer leaves helpers`);
// A helper holds the unguarded server's stdout, which keeps the SDK's
// pipe, and so this event loop, alive: exit explicitly.
process.exit(0);
