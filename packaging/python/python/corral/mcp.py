"""corral for the official MCP Python SDK: a stdio server behind
`corral mcp wrap`.

A stdio MCP server may start helpers that outlive it: a child in a session
of its own, a double-forked daemon, one that ignores SIGTERM. The SDK's
`stdio_client` ends only the server's process group when it closes, so
those stay. Started through `corral mcp wrap`, the server runs as an owned
process tree, and when the client closes, all of the tree is ended (close
stdin, a grace, SIGTERM, SIGKILL), helpers included.

`guarded` needs no import of the SDK (it copies the parameters it is
given); `stdio_client` imports it when called, so this module loads without
the SDK installed.

Example::

    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters
    import corral.mcp

    params = StdioServerParameters(command="python3", args=["server.py"], cwd="/srv/tools")
    async with corral.mcp.stdio_client(params, close_grace=1) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            ...
    # here the server and everything it started are gone

or, with anything that takes `StdioServerParameters` (``mcp.Client``)::

    client = mcp.Client(corral.mcp.guarded(params))
"""

from __future__ import annotations

import os
import sys
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, AsyncIterator, Sequence, TextIO, TypeVar

from ._run import Backend, Duration, _duration, _options, binary

if TYPE_CHECKING:
    from mcp.client.stdio import StdioServerParameters

__all__ = ["guarded", "stdio_client", "wrap_args"]

Params = TypeVar("Params", bound="StdioServerParameters")


def wrap_args(
    command: str,
    args: Sequence[str] = (),
    *,
    close_grace: Duration | None = None,
    kill_after: Duration | None = None,
    final_bound: Duration | None = None,
    backend: Backend | None = None,
    report: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    options: Sequence[str] = (),
) -> list[str]:
    """The arguments of `corral mcp wrap` (after the executable) that start
    `command` with `args`."""
    wrap = ["mcp", "wrap"]
    wrap += _options(
        [
            ("--close-grace", _duration("close_grace", close_grace) if close_grace is not None else None),
            ("--kill-after", _duration("kill_after", kill_after) if kill_after is not None else None),
            ("--final-bound", _duration("final_bound", final_bound) if final_bound is not None else None),
            ("--backend", backend),
            ("--report", os.fspath(report) if report is not None else None),
            ("--verbose", verbose),
        ]
    )
    return [*wrap, *options, "--", command, *args]


def guarded(
    params: Params,
    *,
    close_grace: Duration | None = None,
    kill_after: Duration | None = None,
    final_bound: Duration | None = None,
    backend: Backend | None = None,
    report: str | os.PathLike[str] | None = None,
    verbose: bool = False,
    options: Sequence[str] = (),
    corral: str | os.PathLike[str] | None = None,
) -> Params:
    """The same server, started through `corral mcp wrap`.

    Returns a copy of `params` (an SDK `StdioServerParameters`) whose
    command is corral and whose arguments are ``mcp wrap [OPTIONS] --
    COMMAND ARGS...``; its `env`, `cwd` and encoding are kept (corral passes
    its environment and working directory on to the server).

    Args:
        params: the server as the SDK would start it.
        close_grace: after the client closes the server's stdin, how long
            the server may take to exit by itself (corral's default: 2 s).
        kill_after: from SIGTERM to SIGKILL (default 2 s).
        final_bound: after SIGKILL, how long to wait for the tree (1 s).
        backend: ``"cgroup"``, ``"subreaper"``, ``"group"`` or ``"auto"``.
        report: write corral's JSON report here when the guard ends
            (docs/mcp.md).
        verbose: corral logs each shutdown step on stderr.
        options: any other `corral mcp wrap` options.
        corral: the corral executable (default: `corral.binary()`).

    The SDK signals the guard 2 s after closing its stdin: keep
    `close_grace` + `kill_after` under that if the report matters.
    """
    executable = os.fspath(corral) if corral is not None else binary()
    args = wrap_args(
        params.command,
        list(params.args),
        close_grace=close_grace,
        kill_after=kill_after,
        final_bound=final_bound,
        backend=backend,
        report=report,
        verbose=verbose,
        options=options,
    )
    return params.model_copy(update={"command": executable, "args": args})


@asynccontextmanager
async def stdio_client(
    params: StdioServerParameters,
    errlog: TextIO = sys.stderr,
    **guard: Any,
) -> AsyncIterator[Any]:
    """The SDK's `mcp.client.stdio.stdio_client`, with the server guarded.

    Yields what the SDK's yields (its read and write streams); `guard` takes
    the keyword arguments of `guarded`. When the block is left, the SDK
    closes the guard's stdin and corral ends the server's whole tree.
    """
    from mcp.client.stdio import stdio_client as sdk_stdio_client

    async with sdk_stdio_client(guarded(params, **guard), errlog=errlog) as streams:
        yield streams
