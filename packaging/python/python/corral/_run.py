"""`corral.run`: a command run by `corral run` as an owned process tree.

The outcome and the cleanup come from corral's JSON report (docs/report.md),
which corral writes to a pipe given to it with `--report-fd`; nothing is
read from corral's or the command's text.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sysconfig
import threading
from dataclasses import dataclass, field
from datetime import timedelta
from typing import IO, Any, Generic, Literal, Mapping, Sequence, TypeVar, Union, overload

__all__ = [
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
    "run",
]

#: A duration: seconds (int or float), a `timedelta`, or a string corral
#: parses itself (``"1m30s"``, ``"500ms"``, ``"inf"``).
Duration = Union[int, float, timedelta, str]

#: A backend: how the tree is contained (``corral capabilities``).
Backend = Literal["auto", "cgroup", "subreaper", "group"]

#: What each status corral returns for itself means (``corral run --help``).
EXIT_MEANINGS: Mapping[int, str] = {
    125: "corral itself failed: bad option or duration, no containment, report",
    126: "the command was found but cannot be executed",
    127: "the command was not found",
}

Output = TypeVar("Output", str, bytes)


class CorralError(Exception):
    """corral itself failed, or could not start the command.

    Raised when corral exits without running the command: a bad option or
    duration (status 125, nothing ran and no report was written), no
    containment, or a command that is not found (127) or cannot be executed
    (126). `message` is corral's own (its standard error, or the report's
    `outcome.error`); `meaning` is what `exit_status` means.
    """

    def __init__(
        self,
        message: str,
        exit_status: int | None,
        stderr: str = "",
        report: Mapping[str, Any] | None = None,
    ) -> None:
        self.message = message
        #: corral's exit status; None when corral could not be started or
        #: died of a signal.
        self.exit_status = exit_status
        self.meaning = EXIT_MEANINGS.get(exit_status, "") if exit_status is not None else ""
        #: corral's standard error (with the command's, if it ran).
        self.stderr = stderr
        #: The raw JSON report, if corral wrote one.
        self.report = report
        status = f"corral exited {exit_status}" if exit_status is not None else "corral failed"
        if self.meaning:
            status += f" ({self.meaning})"
        super().__init__(f"{status}: {message}" if message else status)


@dataclass(frozen=True)
class Outcome:
    """How the run ended: the report's `outcome`."""

    #: ``exited``, ``signaled``, ``timed_out``, ``cancelled``,
    #: ``limit_exceeded`` (``spawn_failed`` and ``not_started`` raise
    #: `CorralError` instead).
    kind: str
    #: With ``exited``: the command's exit code.
    code: int | None = None
    #: With ``signaled``: the signal the command died of (e.g. ``SIGSEGV``).
    signal: str | None = None
    #: With ``limit_exceeded``: ``memory``, ``processes`` or ``cpu_time``.
    limit: str | None = None
    #: With ``spawn_failed``: why the command could not be started.
    error: str | None = None
    #: With ``not_started``: why it was not started.
    reason: str | None = None


@dataclass(frozen=True)
class Leader:
    """How the command's own process ended: an exit code or a signal."""

    code: int | None = None
    signal: str | None = None


@dataclass(frozen=True)
class Durations:
    """Seconds: until the end began, the cleanup after it, and in all."""

    run: float
    cleanup: float
    total: float


@dataclass(frozen=True)
class SignalSent:
    """A signal corral sent to the tree."""

    #: Seconds after the spawn.
    at: float
    #: E.g. ``SIGTERM``, ``SIGKILL``.
    signal: str
    #: How many processes it reached; None where the kernel does not say
    #: (``cgroup.kill``).
    delivered: int | None


@dataclass(frozen=True)
class Process:
    """A process, named by pid and start time (clock ticks after boot)."""

    pid: int
    start_time: int
    command: str


@dataclass(frozen=True)
class Cleanup:
    """How the tree was ended."""

    #: ``cgroup``, ``subreaper`` or ``group``.
    backend: str | None
    #: Every signal sent to the tree, in order.
    signals: list[SignalSent]
    #: Whether SIGKILL was needed.
    escalated: bool
    #: Processes still alive after SIGKILL and the final bound (stuck in the
    #: kernel); normally empty.
    survivors: list[Process]
    #: Members that had moved out of the leaf cgroup and were killed by
    #: identity.
    left_cgroup: list[Process]
    #: The leaf cgroup used, if any.
    cgroup: str | None
    #: Anything worth knowing that is not an error.
    notes: list[str]


@dataclass(frozen=True)
class Result(Generic[Output]):
    """What `run` returns: the outcome, status, output and cleanup."""

    #: The command as corral ran it.
    command: list[str]
    outcome: Outcome
    #: corral's exit status: the command's own, 124 after a timeout, 128+N
    #: after a signal (``corral run --help``).
    exit_status: int
    #: The command's standard output and error (str with ``text=True``).
    stdout: Output
    stderr: Output
    leader: Leader | None
    #: True when the command was stopped: what it did before is unknown.
    effects_unknown: bool
    durations: Durations
    cleanup: Cleanup
    #: The report as corral wrote it (fields this module does not name,
    #: such as ``limits``, are here).
    report: Mapping[str, Any] = field(repr=False)

    @property
    def timed_out(self) -> bool:
        """Whether the time limit passed and the tree was ended."""
        return self.outcome.kind == "timed_out"

    @property
    def ok(self) -> bool:
        """Whether the command exited by itself with status 0."""
        return self.outcome.kind == "exited" and self.outcome.code == 0


def binary() -> str:
    """The `corral` executable: the one this package installed beside the
    Python running it, else the first on PATH.

    Raises `CorralError` if there is none.
    """
    candidates = [sysconfig.get_path("scripts")]
    try:
        candidates.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for folder in candidates:
        if folder:
            path = os.path.join(folder, "corral")
            if os.access(path, os.X_OK):
                return path
    found = shutil.which("corral")
    if found is None:
        raise CorralError(
            "no corral executable beside this Python or on PATH; "
            "install the corral wheel, or pass corral=PATH",
            None,
        )
    return found


def _duration(name: str, value: Duration) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, timedelta)):
        raise TypeError(f"{name} must be seconds, a timedelta or a string, not {value!r}")
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if math.isnan(seconds):
        return "nan"  # corral names the error
    if math.isinf(seconds):
        return "inf" if seconds > 0 else "-inf"
    text = f"{seconds:.9f}".rstrip("0").rstrip(".")
    return f"{text}s"


def _options(pairs: Sequence[tuple[str, object]]) -> list[str]:
    args: list[str] = []
    for flag, value in pairs:
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        else:
            args.append(f"{flag}={value}")
    return args


def _process(entry: Mapping[str, Any]) -> Process:
    return Process(int(entry["pid"]), int(entry["start_time"]), str(entry["command"]))


def _parse(report: Mapping[str, Any], stdout: Output, stderr: Output) -> Result[Output]:
    outcome = report["outcome"]
    leader = report.get("leader")
    durations = report.get("durations") or {}
    return Result(
        command=list(report.get("command", [])),
        outcome=Outcome(
            kind=outcome["kind"],
            code=outcome.get("code"),
            signal=outcome.get("signal"),
            limit=outcome.get("limit"),
            error=outcome.get("error"),
            reason=outcome.get("reason"),
        ),
        exit_status=int(report["exit_status"]),
        stdout=stdout,
        stderr=stderr,
        leader=Leader(leader.get("code"), leader.get("signal")) if leader else None,
        effects_unknown=bool(report.get("effects_unknown", False)),
        durations=Durations(
            float(durations.get("run", 0.0)),
            float(durations.get("cleanup", 0.0)),
            float(durations.get("total", 0.0)),
        ),
        cleanup=Cleanup(
            backend=report.get("backend"),
            signals=[
                SignalSent(float(s["at"]), str(s["signal"]), s.get("delivered"))
                for s in report.get("signals", [])
            ],
            escalated=bool(report.get("escalated", False)),
            survivors=[_process(p) for p in report.get("survivors", [])],
            left_cgroup=[_process(p) for p in report.get("left_cgroup", [])],
            cgroup=report.get("cgroup"),
            notes=[str(n) for n in report.get("notes", [])],
        ),
        report=report,
    )


def _drain(stream: IO[bytes] | int, into: list[bytes]) -> threading.Thread:
    """Reads a pipe to its end in a thread (so that no pipe fills up)."""

    def read() -> None:
        with open(stream, "rb", closefd=True) if isinstance(stream, int) else stream as f:
            into.append(f.read())

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


@overload
def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    timeout: Duration | None = ...,
    kill_after: Duration | None = ...,
    signal: str | int | None = ...,
    final_bound: Duration | None = ...,
    preserve_status: bool = ...,
    backend: Backend | None = ...,
    user: str | None = ...,
    max_procs: int | None = ...,
    max_memory: str | int | None = ...,
    cpus: float | None = ...,
    cpu_time: Duration | None = ...,
    max_open_files: int | None = ...,
    limits_best_effort: bool = ...,
    options: Sequence[str] = ...,
    input: bytes | None = ...,
    text: Literal[False] = ...,
    cwd: str | os.PathLike[str] | None = ...,
    env: Mapping[str, str] | None = ...,
    corral: str | os.PathLike[str] | None = ...,
) -> Result[bytes]: ...


@overload
def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    timeout: Duration | None = ...,
    kill_after: Duration | None = ...,
    signal: str | int | None = ...,
    final_bound: Duration | None = ...,
    preserve_status: bool = ...,
    backend: Backend | None = ...,
    user: str | None = ...,
    max_procs: int | None = ...,
    max_memory: str | int | None = ...,
    cpus: float | None = ...,
    cpu_time: Duration | None = ...,
    max_open_files: int | None = ...,
    limits_best_effort: bool = ...,
    options: Sequence[str] = ...,
    input: str | None = ...,
    text: Literal[True],
    cwd: str | os.PathLike[str] | None = ...,
    env: Mapping[str, str] | None = ...,
    corral: str | os.PathLike[str] | None = ...,
) -> Result[str]: ...


def run(
    command: Sequence[str | os.PathLike[str]],
    *,
    timeout: Duration | None = None,
    kill_after: Duration | None = None,
    signal: str | int | None = None,
    final_bound: Duration | None = None,
    preserve_status: bool = False,
    backend: Backend | None = None,
    user: str | None = None,
    max_procs: int | None = None,
    max_memory: str | int | None = None,
    cpus: float | None = None,
    cpu_time: Duration | None = None,
    max_open_files: int | None = None,
    limits_best_effort: bool = False,
    options: Sequence[str] = (),
    input: bytes | str | None = None,
    text: bool = False,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    corral: str | os.PathLike[str] | None = None,
) -> Result[bytes] | Result[str]:
    """Runs `command` with `corral run` and returns how it went.

    The command runs as an owned process tree: when it exits, times out or
    this call is interrupted, all of the tree is ended (setsid and
    double-fork escapes included), and the call returns only once it is.
    Its standard output and error are captured; its standard input is
    `input` (or /dev/null).

    Args:
        command: the program and its arguments.
        timeout: end the tree after this long (``-t``); None: no limit.
        kill_after: SIGKILL this long after `signal` (``-k``; corral's
            default is 5 s; 0 sends SIGKILL at once).
        signal: the first signal, a name (``"TERM"``, ``"INT"``) or number.
        final_bound: after SIGKILL, wait at most this long (default 1 s).
        preserve_status: exit with the command's status even after a
            timeout, instead of 124.
        backend: ``"cgroup"``, ``"subreaper"``, ``"group"`` or ``"auto"``.
        user: run as ``USER[:GROUP]`` (needs root).
        max_procs, max_memory, cpus, cpu_time, max_open_files,
        limits_best_effort: limits on the whole tree (docs/limits.md).
        options: any other ``corral run`` options, e.g.
            ``["--max-swap=0"]``.
        input: the command's standard input.
        text: decode stdout and stderr (and encode `input`) as UTF-8.
        cwd, env: the command's working directory and whole environment.
        corral: the corral executable (default: `binary()`).

    Returns:
        A `Result`: `outcome`, `exit_status`, `stdout`, `stderr` and the
        `cleanup` (signals sent, survivors), from corral's report.

    Raises:
        CorralError: corral failed (a bad option or duration: status 125,
            with corral's message), or the command could not be started
            (126, 127).

    Example::

        import corral
        result = corral.run(["make", "test"], timeout=600, kill_after=5)
        if result.timed_out:
            print("timed out; survivors:", result.cleanup.survivors)
        print(result.exit_status, result.stdout.decode())
    """
    if isinstance(command, (str, bytes)):
        raise TypeError("command must be a list of arguments, e.g. ['sh', '-c', 'echo hi']")
    argv = [os.fspath(corral) if corral is not None else binary(), "run"]
    argv += _options(
        [
            ("--timeout", _duration("timeout", timeout) if timeout is not None else None),
            ("--kill-after", _duration("kill_after", kill_after) if kill_after is not None else None),
            ("--final-bound", _duration("final_bound", final_bound) if final_bound is not None else None),
            ("--signal", signal),
            ("--preserve-status", preserve_status),
            ("--backend", backend),
            ("--user", user),
            ("--max-procs", max_procs),
            ("--max-memory", max_memory),
            ("--cpus", cpus),
            ("--cpu-time", _duration("cpu_time", cpu_time) if cpu_time is not None else None),
            ("--max-open-files", max_open_files),
            ("--limits-best-effort", limits_best_effort),
        ]
    )
    argv += list(options)

    report_read, report_write = os.pipe()
    argv += [f"--report-fd={report_write}", "--", *(os.fspath(a) for a in command)]
    if isinstance(input, str):
        input = input.encode()
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(report_write,),
            cwd=cwd,
            env=env,
        )
    except OSError as error:
        os.close(report_read)
        os.close(report_write)
        raise CorralError(f"cannot start {argv[0]}: {error}", None) from error
    os.close(report_write)

    report_bytes: list[bytes] = []
    stdout: list[bytes] = []
    stderr: list[bytes] = []
    assert process.stdout is not None and process.stderr is not None
    readers = [
        _drain(report_read, report_bytes),
        _drain(process.stdout, stdout),
        _drain(process.stderr, stderr),
    ]
    try:
        if process.stdin is not None:
            try:
                process.stdin.write(input or b"")
            except BrokenPipeError:
                pass  # the command did not read it all
            finally:
                try:
                    process.stdin.close()
                except BrokenPipeError:
                    pass
        status = process.wait()
        for reader in readers:
            reader.join()
    except BaseException:
        # Interrupted (KeyboardInterrupt...): corral ends the tree on SIGTERM.
        process.terminate()
        process.wait()
        raise

    err_bytes = stderr[0] if stderr else b""
    err_text = err_bytes.decode(errors="replace")
    raw = report_bytes[0] if report_bytes else b""
    if not raw.strip():
        message = err_text.strip() or "no report and no message"
        raise CorralError(message, status if status >= 0 else None, err_text)
    report = json.loads(raw)
    kind = report["outcome"]["kind"]
    if kind in ("spawn_failed", "not_started"):
        outcome = report["outcome"]
        message = outcome.get("error") or outcome.get("reason") or err_text.strip()
        raise CorralError(str(message), status, err_text, report)
    out_bytes = stdout[0] if stdout else b""
    if text:
        return _parse(report, out_bytes.decode(errors="replace"), err_text)
    return _parse(report, out_bytes, err_bytes)
