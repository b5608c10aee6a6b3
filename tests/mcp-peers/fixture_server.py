"""A stdio MCP server for corral-mcp's tests that leaves helpers behind.

Built on the official Python SDK's MCPServer, so it speaks both the
2026-07-28 `server/discover` era and the 2025-11-25 `initialize` handshake.
Tools: `echo(message)` and `sleep(seconds)`.

With CORRAL_MCP_FIXTURE_PIDS=FILE set, it first starts three helpers that a
client which signals only the server (or its process group) leaves behind,
then writes the identity (pid, start time) of itself and each helper to FILE
as JSON (atomically: written to FILE.tmp, then renamed):

- setsid_child: a `sleep` in a session of its own, holding the server's
  stdout (a process-group kill misses it; its pipe end keeps stdout open);
- term_ignorer: a `sleep` that ignores SIGTERM (needs SIGKILL);
- daemon: a classic double-forked daemon (setsid, orphaned, no stdio).
"""

import json
import os
import signal
import subprocess
import sys
import time

from mcp.server import MCPServer


def start_time(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


def identity(pid: int) -> dict:
    return {"pid": pid, "start_time": start_time(pid)}


def double_forked_daemon() -> int:
    """Forks twice with a setsid between; returns the grandchild's pid."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(read_end)
        os.setsid()
        grandchild = os.fork()
        if grandchild == 0:
            os.close(write_end)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.execvp("sleep", ["sleep", "1000"])
        os.write(write_end, str(grandchild).encode())
        os._exit(0)
    os.close(write_end)
    pid = int(os.read(read_end, 32))
    os.close(read_end)
    os.waitpid(child, 0)
    return pid


def start_helpers(path: str) -> None:
    null = subprocess.DEVNULL
    setsid_child = subprocess.Popen(["sleep", "1000"], stdin=null, start_new_session=True)
    term_ignorer = subprocess.Popen(
        ["sleep", "1000"],
        stdin=null,
        stdout=null,
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )
    daemon = double_forked_daemon()
    pids = {
        "server": identity(os.getpid()),
        "setsid_child": identity(setsid_child.pid),
        "term_ignorer": identity(term_ignorer.pid),
        "daemon": identity(daemon),
    }
    with open(path + ".tmp", "w") as f:
        json.dump(pids, f)
    os.rename(path + ".tmp", path)


server = MCPServer("corral-mcp-fixture")


@server.tool()
def echo(message: str) -> str:
    """Returns the message."""
    return f"Echo: {message}"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps, then says so."""
    import anyio

    await anyio.sleep(seconds)
    return f"slept {seconds}s"


if __name__ == "__main__":
    pids_file = os.environ.get("CORRAL_MCP_FIXTURE_PIDS")
    if pids_file:
        start_helpers(pids_file)
    print(f"fixture server {os.getpid()} ready", file=sys.stderr, flush=True)
    server.run("stdio")
