"""An MCP client for corral-mcp's tests, on the official Python SDK.

Usage: client.py [--mode auto|legacy|2026-07-28] [--slow TOOL ARGS_JSON] -- COMMAND [ARGS...]

Starts COMMAND as a stdio MCP server (with this process's environment),
connects (mode auto probes `server/discover` and falls back to `initialize`),
lists the tools, calls `echo`, and prints one JSON object per line on stdout:

  {"event": "connected", "protocol_version": ..., "tools": [...]}
  {"event": "echo", "text": ...}
  {"event": "calling_slow"}            (with --slow, just before the call)
  {"event": "slow", "error": ...}      (with --slow, if the call fails)
  {"event": "closed", "close_seconds": ...}

then closes the connection (the SDK's shutdown: close stdin, wait, signal).
"""

import json
import os
import sys
import time

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters


def say(**event) -> None:
    print(json.dumps(event), flush=True)


async def main(argv: list[str]) -> int:
    mode = "auto"
    slow = None
    while argv and argv[0] != "--":
        flag = argv.pop(0)
        if flag == "--mode":
            mode = argv.pop(0)
        elif flag == "--slow":
            slow = (argv.pop(0), json.loads(argv.pop(0)))
        else:
            print(f"client.py: unknown option {flag}", file=sys.stderr)
            return 2
    if not argv or len(argv) < 2:
        print("client.py: give the server command after --", file=sys.stderr)
        return 2
    command, *args = argv[1:]
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    client = Client(params, mode=mode, read_timeout_seconds=60)
    async with client:
        session = client.session
        tools = await client.list_tools()
        say(
            event="connected",
            protocol_version=session.protocol_version,
            tools=sorted(tool.name for tool in tools.tools),
        )
        result = await client.call_tool("echo", {"message": "hello through corral"})
        say(event="echo", text=result.content[0].text, is_error=bool(result.is_error))
        if slow is not None:
            say(event="calling_slow")
            try:
                result = await client.call_tool(slow[0], slow[1])
                say(event="slow", text=result.content[0].text, is_error=bool(result.is_error))
            except Exception as error:  # the server died: the guard's answer
                say(event="slow", error=str(error))
        closing = time.monotonic()
    say(event="closed", close_seconds=time.monotonic() - closing)
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
