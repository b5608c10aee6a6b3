// The client side of the official MCP conformance suite
// (@modelcontextprotocol/conformance), played by `corral mcp list` and
// `corral mcp call` (crates/corral-cli/tests/mcp_conformance.rs).
//
// Usage (as the suite runs it): node conformance_client.mjs URL
//
// The suite appends its server's URL and says which scenario it plays in
// MCP_CONFORMANCE_SCENARIO (with its data, if any, in
// MCP_CONFORMANCE_CONTEXT). This script only chooses the corral commands a
// scenario needs (which tools to call, with what); everything on the wire
// is corral's. CORRAL is the corral binary. Each command's output goes to
// stderr; the exit status is 1 if any command that should succeed failed.

import { spawnSync } from "node:child_process";

const corral = process.env.CORRAL;
const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}");
const url = process.argv[process.argv.length - 1];
let failed = false;

function run(args) {
    const full = ["mcp", ...args, "--url", url];
    const done = spawnSync(corral, full, { encoding: "utf8", timeout: 60_000 });
    process.stderr.write(`$ corral ${full.join(" ")}\n  exit ${done.status}\n${done.stdout}${done.stderr}`);
    return done;
}

function ok(args) {
    const done = run(args);
    if (done.status !== 0) failed = true;
    return done;
}

function list() {
    const done = ok(["list", "--json"]);
    return done.status === 0 ? JSON.parse(done.stdout).result.tools : [];
}

function call(tool, args = {}, options = []) {
    return ok(["call", ...options, tool, JSON.stringify(args)]);
}

switch (scenario) {
    case "initialize":
    case "request-metadata":
    case "json-schema-ref-no-deref":
        list();
        break;
    case "tools_call":
        call("add_numbers", { a: 2, b: 3 });
        break;
    case "sse-retry":
        call("test_reconnection");
        break;
    case "elicitation-sep1034-client-defaults":
        call("test_client_elicitation_defaults", {}, ["--elicitation", "defaults"]);
        break;
    case "http-standard-headers":
        for (const tool of list()) call(tool.name);
        break;
    case "http-custom-headers":
        list();
        for (const { name, arguments: args } of context.toolCalls) call(name, args);
        break;
    case "http-invalid-tool-headers":
        // Every tool corral lists is called: the invalid ones must not be
        // listed, and calling one by name must be refused before it is sent.
        for (const tool of list()) call(tool.name, { region: "us-west1" });
        if (run(["call", "invalid_empty_header", "{}"]).status === 0) failed = true;
        break;
    case "json-schema-2020-12-preservation": {
        const tools = list();
        const focal = tools.find((tool) => tool.name !== "json_schema_echo");
        call("json_schema_echo", { schema: focal.inputSchema });
        break;
    }
    case "sep-2322-client-request-state":
        for (const tool of list()) call(tool.name, {}, ["--elicitation", "defaults"]);
        break;
    default:
        process.stderr.write(`conformance_client.mjs: no play for the scenario ${scenario}\n`);
        failed = true;
}
process.exit(failed ? 1 : 0);
