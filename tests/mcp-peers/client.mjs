// An MCP client for corral's benches, on the official TypeScript SDK
// (@modelcontextprotocol/sdk, installed with server-everything by
// scripts/install-mcp-peers).
//
// Usage: node client.mjs -- COMMAND [ARGS...]
//
// Starts COMMAND as a stdio MCP server (with this process's whole
// environment), connects, lists the tools, calls `echo`, closes the
// connection (the SDK's shutdown: end stdin, wait up to 2 s for the pipes to
// close, SIGTERM if the server has not exited, 2 s, SIGKILL), and prints one
// JSON object per line on stdout, as client.py does:
//
//   {"event": "connected", "server": {name, version}, "tools": [...]}
//   {"event": "echo", "text": ..., "is_error": ...}
//   {"event": "closed", "close_seconds": ...}
//
// It exits explicitly after the close: a helper of the server that holds
// the server's stdout would otherwise keep this process's event loop alive.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function say(event) {
    process.stdout.write(JSON.stringify(event) + "\n");
}

async function main(argv) {
    const dashes = argv.indexOf("--");
    const server = dashes < 0 ? [] : argv.slice(dashes + 1);
    if (server.length === 0) {
        process.stderr.write("client.mjs: give the server command after --\n");
        return 2;
    }
    const [command, ...args] = server;
    const transport = new StdioClientTransport({
        command,
        args,
        env: { ...process.env },
        stderr: "inherit",
    });
    const client = new Client({ name: "corral-bench-ts", version: "1.0.0" });
    await client.connect(transport);
    const tools = await client.listTools();
    say({
        event: "connected",
        server: client.getServerVersion() ?? null,
        tools: tools.tools.map((tool) => tool.name).sort(),
    });
    const result = await client.callTool({
        name: "echo",
        arguments: { message: "hello through corral" },
    });
    say({ event: "echo", text: result.content?.[0]?.text, is_error: Boolean(result.isError) });
    const closing = performance.now();
    await client.close();
    say({ event: "closed", close_seconds: (performance.now() - closing) / 1000 });
    return 0;
}

main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error) => {
        process.stderr.write(`client.mjs: ${error?.stack ?? error}\n`);
        process.exit(1);
    },
);
