// Types of @corral-run/corral (lib/index.mjs). Hand-written; the report's
// fields are corral's wire format, version 1 (docs/report.md).

/** A duration: seconds, or a string corral parses ("1m30s", "500ms", "2.5"). */
export type Duration = number | string;

/** How the command's own process ended. */
export type Leader = { code: number } | { signal: string };

/** How the run ended (`outcome.kind`, docs/report.md). */
export type RunOutcome =
    | { kind: "exited"; code: number }
    | { kind: "signaled"; signal: string }
    | { kind: "timed_out" }
    | { kind: "cancelled" }
    | { kind: "limit_exceeded"; limit: "memory" | "processes" | "cpu_time" }
    | { kind: "spawn_failed"; error: string }
    | { kind: "not_started"; reason: string };

/** A process named by pid and start time (clock ticks after boot). */
export interface ProcessIdentity {
    pid: number;
    start_time: number;
    command: string;
}

/** One signal corral sent to the tree. */
export interface SignalSent {
    /** Seconds after the spawn. */
    at: number;
    signal: string;
    /** How many processes it reached; null where the kernel does not say (cgroup.kill). */
    delivered: number | null;
}

/** `corral run --report`'s JSON document, version 1. Readers ignore fields they do not know. */
export interface Report {
    version: number;
    command: string[];
    outcome: RunOutcome;
    exit_status: number;
    leader: Leader | null;
    effects_unknown: boolean;
    backend: "cgroup" | "subreaper" | "group" | null;
    durations: { run: number; cleanup: number; total: number };
    signals: SignalSent[];
    escalated: boolean;
    /** Processes still alive after SIGKILL and the final bound; [] when the whole tree ended. */
    survivors: ProcessIdentity[];
    left_cgroup: ProcessIdentity[];
    cgroup: string | null;
    notes: string[];
    /** Only with limit options (extraArgs such as --max-memory). */
    limits?: Record<string, unknown>;
    [field: string]: unknown;
}

export interface RunOptions {
    /** --timeout: end the tree after this long (default: no limit). */
    timeout?: Duration;
    /** --kill-after: SIGKILL this long after the first signal (corral's default 5s). */
    killAfter?: Duration;
    /** --final-bound: after SIGKILL, wait at most this long (default 1s). */
    finalBound?: Duration;
    /** --signal: corral's first signal to the tree, a name ("TERM", "INT", "RTMIN+2") or a number. Not an AbortSignal: see abortSignal. */
    signal?: string | number;
    /** --preserve-status: the command's own status even after a timeout. */
    preserveStatus?: boolean;
    /** --backend. */
    backend?: "auto" | "cgroup" | "subreaper" | "group";
    /** More `corral run` options, before `--` (e.g. ["--max-memory", "2G"]). */
    extraArgs?: string[];
    /** Ends the run: corral gets SIGTERM and ends the whole tree (outcome "cancelled", status 143). */
    abortSignal?: AbortSignal;
    /** Written to the command's standard input, which is then closed; without it, stdin is /dev/null. */
    input?: string | Uint8Array;
    cwd?: string;
    env?: NodeJS.ProcessEnv;
    /** How stdout and stderr are returned: a text encoding (default "utf8"), or "buffer". */
    encoding?: BufferEncoding | "buffer";
    /** The corral binary (default: corralPath()). */
    corral?: string;
}

export interface RunResult<Output = string> {
    /** corral's exit status (corral run --help): the command's own, 124 on timeout, 128+N for a signal. */
    exitStatus: number;
    stdout: Output;
    stderr: Output;
    /** The cleanup report corral wrote to --report-fd. */
    report: Report;
}

/**
 * Runs argv (the command and its arguments) under `corral run`, and resolves
 * once corral has exited and the whole tree is gone, with the exit status,
 * the output and the report. Rejects with CorralError when corral itself
 * failed (not found, bad arguments, the command could not be started).
 */
export function run(argv: string[], options: RunOptions & { encoding: "buffer" }): Promise<RunResult<Buffer>>;
export function run(argv: string[], options?: RunOptions): Promise<RunResult<string>>;

/** corral itself failed: exitStatus 125 (corral), 126 or 127 (the command could not be started), or 128+N if corral was killed. */
export class CorralError extends Error {
    name: "CorralError";
    exitStatus: number | null;
    /** The report, when corral wrote one (spawn_failed, not_started). */
    report: Report | null;
    /** What corral said on standard error. */
    stderr: string | Buffer;
}

/**
 * The fields of the TypeScript SDK's StdioServerParameters
 * (@modelcontextprotocol/sdk/client/stdio.js) that guardedStdio reads;
 * any others are passed through unchanged.
 */
export interface StdioServerParametersLike {
    command: string;
    args?: string[];
    env?: Record<string, string>;
    cwd?: string;
    stderr?: unknown;
}

export interface GuardOptions {
    /** --close-grace: after the server's stdin closes, how long it may take to exit (default 2s). */
    closeGrace?: Duration;
    /** --kill-after: from SIGTERM to SIGKILL (default 2s). */
    killAfter?: Duration;
    /** --final-bound (default 1s). */
    finalBound?: Duration;
    backend?: "auto" | "cgroup" | "subreaper" | "group";
    /** --report FILE: the wrap's cleanup report, written when it ends. */
    report?: string;
    /** More `corral mcp wrap` options, before `--`. */
    extraArgs?: string[];
    /** The corral binary (default: corralPath()). */
    corral?: string;
}

/**
 * Parameters that start the same stdio MCP server through `corral mcp wrap
 * -- COMMAND ARGS...`: same env, cwd and stderr; the whole server tree ends
 * when the client closes.
 */
export function guardedStdio<P extends StdioServerParametersLike>(
    params: P,
    options?: GuardOptions,
): Omit<P, "command" | "args"> & { command: string; args: string[] };

/** The corral binary this module runs: CORRAL_BINARY_PATH, else the platform package's. */
export function corralPath(): string;
