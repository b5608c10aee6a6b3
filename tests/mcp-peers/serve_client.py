"""An MCP client for `corral mcp serve`'s tests, on the official Python SDK.

Usage:
  serve_client.py [--mode auto|legacy] [--cancel-after SECS] SCRIPT_JSON -- COMMAND [ARGS...]
  serve_client.py [--mode auto|legacy] [--cancel-after SECS] --url URL --token TOKEN SCRIPT_JSON

Connects to the server (over stdio, spawning COMMAND; or over streamable
HTTP with `Authorization: Bearer TOKEN`), then runs SCRIPT_JSON, a JSON list
of steps:

  {"list": true}                                  list the tools
  {"call": TOOL, "arguments": {...}}              call a tool
  {"call": TOOL, "arguments": {...}, "cancel_after": SECS}
                                                  call it and cancel the call
                                                  after SECS (an anyio cancel
                                                  scope: the SDK sends
                                                  notifications/cancelled)

--cancel-after SECS sets "cancel_after" on the last step. Prints one JSON
object per line on stdout:

  {"event": "connected", "protocol_version": ...}
  {"event": "tools", "tools": [names...]}
  {"event": "calling", "tool": ...}               just before each call
  {"event": "result", "tool": ..., "structured": ..., "is_error": ..., "text": [...]}
  {"event": "cancelled", "tool": ...}             the call was cancelled
  {"event": "error", "tool": ..., "message": ...} the call raised
  {"event": "closed"}
"""

import json
import os
import sys

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def say(**event) -> None:
    print(json.dumps(event), flush=True)


def usage(message: str) -> int:
    print(f"serve_client.py: {message}", file=sys.stderr)
    return 2


async def call(client: Client, step: dict) -> None:
    tool = step["call"]
    arguments = step.get("arguments", {})
    say(event="calling", tool=tool)
    result = None
    try:
        cancel_after = step.get("cancel_after")
        if cancel_after is None:
            result = await client.call_tool(tool, arguments)
        else:
            with anyio.move_on_after(float(cancel_after)) as scope:
                result = await client.call_tool(tool, arguments)
            if scope.cancelled_caught:
                say(event="cancelled", tool=tool)
                return
    except Exception as error:  # a JSON-RPC error, a broken connection
        say(event="error", tool=tool, message=str(error))
        return
    say(
        event="result",
        tool=tool,
        structured=result.structured_content,
        is_error=bool(result.is_error),
        text=[block.text for block in result.content if getattr(block, "type", "") == "text"],
    )


async def main(argv: list[str]) -> int:
    mode = "auto"
    url = None
    token = None
    cancel_after = None
    script = None
    command = []
    while argv:
        flag = argv.pop(0)
        if flag == "--mode":
            mode = argv.pop(0)
        elif flag == "--url":
            url = argv.pop(0)
        elif flag == "--token":
            token = argv.pop(0)
        elif flag == "--cancel-after":
            cancel_after = float(argv.pop(0))
        elif flag == "--":
            command = argv
            break
        elif script is None and not flag.startswith("--"):
            script = json.loads(flag)
        else:
            return usage(f"unknown option {flag}")
    if script is None:
        return usage("give the script as one JSON list")
    if cancel_after is not None and script:
        script[-1]["cancel_after"] = cancel_after
    if url is not None:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        server = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    elif command:
        server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    else:
        return usage("give --url URL or the server command after --")
    async with Client(server, mode=mode, read_timeout_seconds=120) as client:
        say(event="connected", protocol_version=client.session.protocol_version)
        for step in script:
            if step.get("list"):
                tools = await client.list_tools()
                say(event="tools", tools=sorted(tool.name for tool in tools.tools))
            else:
                await call(client, step)
    say(event="closed")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
