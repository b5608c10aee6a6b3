"""Checks the corral wheel as installed in a fresh virtual environment.

Run by scripts/package-python with that environment's python, from a folder
outside the source tree (so that `import corral` is the installed one):

    check_installed.py VENV FIXTURE_SERVER SCRATCH

Checks, each printed as it passes (any failure: an AssertionError, exit 1):
1. `import corral` comes from VENV, and `corral.binary()` is VENV/bin/corral;
2. `corral.run` on an escape tree (setsid and a double fork) with timeout 1:
   timed out, 124, the report's first signal reached >= 4 processes,
   survivors == [], and /proc shows 0 processes with the tree's marker;
3. `corral.run` of `sh -c 'echo hi; exit 3'`: exited, status 3, output "hi";
4. corral's own failures raise CorralError: a bad duration (125, corral's
   message naming it) and a command that is not found (127);
5. the MCP SDK's `stdio_client` against FIXTURE_SERVER (a server that
   leaves 3 helpers and writes the 4 identities to CORRAL_MCP_FIXTURE_PIDS):
   unguarded, >= 3 of the 4 are left after the client closes (then ended
   here, by pid and start time); through `corral.mcp.guarded`, 0 are left.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
from pathlib import Path

import corral
import corral.mcp


def say(text: str) -> None:
    print(f"check_installed: {text}", flush=True)


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None  # a zombie: ended, not yet reaped
    return int(fields[19])


def with_argv(argv: list[str]) -> list[int]:
    """The pids whose command line is exactly `argv`."""
    want = ("\0".join(argv) + "\0").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == want:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def check_binary(venv: Path) -> None:
    here = Path(corral.__file__).resolve()
    assert venv.resolve() in here.parents, f"corral imported from {here}, not from {venv}"
    assert corral.binary() == str(venv / "bin" / "corral"), corral.binary()
    say(f"import corral: {here}; binary {corral.binary()}")


def check_escape_tree() -> None:
    marker = f"30.{os.getpid()}{random.randrange(10**6)}"
    result = corral.run(
        ["sh", "-c", f"setsid sleep {marker} & sh -c 'sleep {marker} &'; sleep {marker}"],
        timeout=1,
    )
    assert result.timed_out, result.outcome
    assert result.exit_status == 124, result.exit_status
    assert result.effects_unknown
    assert result.cleanup.survivors == [], result.cleanup.survivors
    first = result.cleanup.signals[0]
    assert first.signal == "SIGTERM", result.cleanup.signals
    assert first.delivered is not None and first.delivered >= 4, result.cleanup.signals
    left = with_argv(["sleep", marker])
    assert left == [], f"{len(left)} of the escape tree left: {left}"
    say(
        f"escape tree: {result.outcome.kind}, {result.exit_status}, backend {result.cleanup.backend}, "
        f"{first.signal} delivered to {first.delivered}, survivors [], 0 left in /proc"
    )


def check_exit_and_output() -> None:
    result = corral.run(["sh", "-c", "echo hi; exit 3"], text=True)
    assert result.outcome.kind == "exited" and result.outcome.code == 3, result.outcome
    assert result.exit_status == 3, result.exit_status
    assert result.stdout == "hi\n", repr(result.stdout)
    assert result.cleanup.survivors == []
    raw = corral.run(["sh", "-c", "echo hi >&2; cat"], input=b"in\n")
    assert raw.ok and raw.stdout == b"in\n" and raw.stderr == b"hi\n", raw
    say("sh -c 'echo hi; exit 3': exited 3, stdout 'hi'; input and stderr as bytes")


def check_errors() -> None:
    try:
        corral.run(["true"], timeout="bogus")
    except corral.CorralError as error:
        assert error.exit_status == 125, error.exit_status
        assert "bogus" in error.message, error.message
        assert error.report is None
        say(f"bad duration: CorralError: {error}")
    else:
        raise AssertionError("a bad duration raised no CorralError")
    try:
        corral.run(["corral-no-such-command"])
    except corral.CorralError as error:
        assert error.exit_status == 127, error.exit_status
        assert "not found" in error.message, error.message
        assert error.report is not None and error.report["outcome"]["kind"] == "spawn_failed"
        say(f"command not found: CorralError: {error}")
    else:
        raise AssertionError("a missing command raised no CorralError")


async def mcp_session(params: object, guard: bool) -> None:
    from mcp import ClientSession
    from mcp.client.stdio import stdio_client

    if guard:
        # Short enough that the guard has ended the tree before the SDK's own
        # 2 s wait after closing stdin runs out.
        params = corral.mcp.guarded(params, close_grace=0.5, kill_after=0.5)  # type: ignore[type-var]
    async with stdio_client(params) as (read, write):  # type: ignore[arg-type]
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"message": "through corral"})
            assert not result.is_error, result


def left_of(pids_file: Path) -> list[tuple[str, int, int]]:
    identities = json.loads(pids_file.read_text())
    return [
        (name, who["pid"], who["start_time"])
        for name, who in identities.items()
        if start_time(who["pid"]) == who["start_time"]
    ]


def check_mcp(fixture: Path, scratch: Path) -> None:
    import anyio
    from mcp.client.stdio import StdioServerParameters

    counts = {}
    for guard in (False, True):
        name = "guarded" if guard else "unguarded"
        pids_file = scratch / f"fixture-{name}.json"
        params = StdioServerParameters(
            command=sys.executable,
            args=[str(fixture)],
            env={"CORRAL_MCP_FIXTURE_PIDS": str(pids_file)},
            cwd=str(scratch),
        )
        anyio.run(mcp_session, params, guard)
        assert pids_file.exists(), f"{name}: the fixture server wrote no {pids_file}"
        assert len(json.loads(pids_file.read_text())) == 4
        left = left_of(pids_file)
        if guard:
            # The guard exits only once the tree is gone; the bound covers
            # a slow machine, not a race.
            deadline = time.monotonic() + 15
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = left_of(pids_file)
        counts[name] = left
        for _, pid, started in left:
            # By identity: a pidfd, then the start time checked through it.
            try:
                pidfd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            try:
                if start_time(pid) == started:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            finally:
                os.close(pidfd)
    unguarded, guarded = counts["unguarded"], counts["guarded"]
    say(f"MCP SDK stdio_client, unguarded: {len(unguarded)} of 4 left ({', '.join(n for n, _, _ in unguarded)})")
    say(f"MCP SDK stdio_client, through corral.mcp.guarded: {len(guarded)} of 4 left")
    assert len(unguarded) >= 3, f"the unguarded comparison left only {len(unguarded)} of 4: it proves nothing"
    assert guarded == [], f"through corral.mcp.guarded, {len(guarded)} of 4 were left: {guarded}"


def main() -> None:
    venv, fixture, scratch = (Path(a) for a in sys.argv[1:4])
    check_binary(venv)
    check_escape_tree()
    check_exit_and_output()
    check_errors()
    check_mcp(fixture, scratch)
    say("all passed")


if __name__ == "__main__":
    main()
