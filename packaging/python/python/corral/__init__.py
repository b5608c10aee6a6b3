"""corral: run a command, or an MCP server, as an owned process tree and end
all of it on time (setsid and double-fork escapes included).

This package installs the `corral` executable (on the virtual environment's
PATH) and drives it from Python:

- `corral.run` runs a command under `corral run` and returns a typed
  `Result`: the outcome, exit status, captured output and how the tree was
  ended, read from corral's JSON report (``--report-fd``, a pipe), never
  from text. corral's own failures raise `CorralError`.
- `corral.mcp.guarded` turns the MCP Python SDK's `StdioServerParameters`
  into ones that start the same server behind `corral mcp wrap`, so that
  closing the client ends the server's whole tree; `corral.mcp.stdio_client`
  is the SDK's `stdio_client` with that guard. The SDK is needed only there
  (``pip install corral[mcp]``).

Example::

    import corral

    result = corral.run(["sh", "-c", "echo hi; exit 3"], timeout=10, text=True)
    assert result.exit_status == 3 and result.stdout == "hi\\n"

    result = corral.run(["sh", "-c", "setsid sleep 100 & sleep 100"], timeout=1)
    assert result.timed_out and result.cleanup.survivors == []

See docs/python.md in corral's repository.
"""

from . import mcp
from ._run import (
    Backend,
    Cleanup,
    CorralError,
    Duration,
    Durations,
    Leader,
    Outcome,
    Process,
    Result,
    SignalSent,
    binary,
    run,
)

__all__ = [
    "Backend",
    "Cleanup",
    "CorralError",
    "Duration",
    "Durations",
    "Leader",
    "Outcome",
    "Process",
    "Result",
    "SignalSent",
    "binary",
    "mcp",
    "run",
]
