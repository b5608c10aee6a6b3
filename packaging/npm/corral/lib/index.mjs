// @corral-run/corral as a module: run a command under `corral run` and get
// its cleanup report (run), and start a stdio MCP server through `corral mcp
// wrap` with the official TypeScript SDK's StdioClientTransport
// (guardedStdio). Types: index.d.mts. See docs/npm.md.

import { spawn } from "node:child_process";
import os from "node:os";

import binary from "./binary.js";

/** The corral binary this module runs (CORRAL_BINARY_PATH, else the platform package's). */
export function corralPath() {
    return binary.binaryPath();
}

/** corral itself failed: it could not start, refused its arguments, or could not start the command. */
export class CorralError extends Error {
    constructor(message, { exitStatus = null, report = null, stderr = "", cause } = {}) {
        super(message, cause === undefined ? undefined : { cause });
        this.name = "CorralError";
        this.exitStatus = exitStatus;
        this.report = report;
        this.stderr = stderr;
    }
}

/** Outcome kinds in which corral, not the command, failed (docs/report.md). */
const CORRAL_FAILED = new Set(["spawn_failed", "not_started"]);

/**
 * Runs argv (the command and its arguments) as `corral run [options] --
 * argv...`, and resolves with its exit status, output and cleanup report
 * once corral has exited (the whole tree ended). Rejects with CorralError
 * when corral itself failed.
 */
export async function run(argv, options = {}) {
    if (!Array.isArray(argv) || argv.length === 0 || !argv.every((arg) => typeof arg === "string")) {
        throw new TypeError("run(argv): argv must be a non-empty array of strings, the command and its arguments");
    }
    if (options.signal instanceof AbortSignal) {
        throw new TypeError(
            "run(): options.signal is corral's first signal (a name such as \"TERM\" or a number); " +
                "pass an AbortSignal as options.abortSignal",
        );
    }
    const corral = options.corral ?? corralPath();
    const args = ["run", ...runOptions(options), "--report-fd", "3", "--", ...argv];
    const input = options.input;
    // Descriptor 3: node makes it a socket pair, which `--report-fd` takes.
    const child = spawn(corral, args, {
        cwd: options.cwd,
        env: options.env,
        stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe", "pipe"],
    });
    const reader = child.stdio[3];

    const stdout = collect(child.stdout);
    const stderr = collect(child.stderr);
    const reportText = collect(reader);
    if (input !== undefined) {
        child.stdin.on("error", () => {}); // the command may not read it all
        child.stdin.end(input);
    }
    const abort = () => child.kill("SIGTERM");
    options.abortSignal?.addEventListener("abort", abort, { once: true });
    if (options.abortSignal?.aborted) {
        abort();
    }

    let exited;
    try {
        exited = await new Promise((resolve, reject) => {
            child.once("error", reject);
            child.once("exit", (code, signal) => resolve({ code, signal }));
        });
    } catch (error) {
        reader.destroy();
        throw new CorralError(`cannot run corral (${corral}): ${error.message}`, { cause: error });
    } finally {
        options.abortSignal?.removeEventListener("abort", abort);
    }
    const exitStatus = exited.signal === null ? exited.code : 128 + os.constants.signals[exited.signal];
    const text = (await reportText).toString("utf8");
    let parsed = null;
    if (text.trim() !== "") {
        parsed = JSON.parse(text);
    }
    // A tree with survivors may still hold the pipes: keep what was read.
    if (parsed === null || parsed.survivors.length > 0) {
        child.stdout.destroy();
        child.stderr.destroy();
    }
    const encoding = options.encoding ?? "utf8";
    const decode = (buffer) => (encoding === "buffer" ? buffer : buffer.toString(encoding));
    const outcome = {
        exitStatus,
        stdout: decode(await stdout),
        stderr: decode(await stderr),
        report: parsed,
    };
    if (parsed === null) {
        const said = (await stderr).toString("utf8").trim().split("\n")[0];
        const how = exited.signal === null ? `exited ${exited.code}` : `was killed by ${exited.signal}`;
        throw new CorralError(`corral ${how} without a report${said ? `: ${said}` : ""}`, {
            exitStatus,
            stderr: outcome.stderr,
        });
    }
    if (CORRAL_FAILED.has(parsed.outcome.kind)) {
        const why = parsed.outcome.error ?? parsed.outcome.reason ?? parsed.outcome.kind;
        throw new CorralError(`corral could not run ${JSON.stringify(argv[0])}: ${why}`, {
            exitStatus,
            report: parsed,
            stderr: outcome.stderr,
        });
    }
    return outcome;
}

/**
 * StdioServerParameters that start the same MCP server through `corral mcp
 * wrap`, which relays its JSON-RPC and ends its whole process tree when the
 * client closes (or either side goes).
 */
export function guardedStdio(params, options = {}) {
    if (params === null || typeof params !== "object" || typeof params.command !== "string" || params.command === "") {
        throw new TypeError("guardedStdio(params): params.command must be the server's command, a non-empty string");
    }
    const wrap = [];
    pushDuration(wrap, "--close-grace", options.closeGrace);
    pushDuration(wrap, "--kill-after", options.killAfter);
    pushDuration(wrap, "--final-bound", options.finalBound);
    if (options.backend !== undefined) {
        wrap.push("--backend", options.backend);
    }
    if (options.report !== undefined) {
        wrap.push("--report", options.report);
    }
    wrap.push(...(options.extraArgs ?? []));
    return {
        ...params,
        command: options.corral ?? corralPath(),
        args: ["mcp", "wrap", ...wrap, "--", params.command, ...(params.args ?? [])],
    };
}

/** `corral run`'s options from run()'s. */
function runOptions(options) {
    const args = [];
    pushDuration(args, "--timeout", options.timeout);
    pushDuration(args, "--kill-after", options.killAfter);
    pushDuration(args, "--final-bound", options.finalBound);
    if (options.signal !== undefined) {
        args.push("--signal", String(options.signal));
    }
    if (options.preserveStatus) {
        args.push("--preserve-status");
    }
    if (options.backend !== undefined) {
        args.push("--backend", options.backend);
    }
    args.push(...(options.extraArgs ?? []));
    return args;
}

/** A duration: a number of seconds, or a string corral parses ("1m30s", "500ms"). */
function pushDuration(args, flag, value) {
    if (value === undefined) {
        return;
    }
    if (typeof value === "number") {
        if (!Number.isFinite(value) || value < 0) {
            throw new TypeError(`${flag}: ${value} is not a duration; give seconds (a finite number >= 0) or a string such as "1m30s"`);
        }
        // Whole milliseconds, the finest unit corral's durations take.
        args.push(flag, `${Math.round(value * 1000)}ms`);
    } else if (typeof value === "string") {
        args.push(flag, value);
    } else {
        throw new TypeError(`${flag}: give seconds (a number) or a string such as "1m30s", not ${typeof value}`);
    }
}

/** The whole of a stream, as one Buffer (what was read if it is destroyed). */
function collect(stream) {
    const chunks = [];
    stream.on("data", (chunk) => chunks.push(chunk));
    return new Promise((resolve) => {
        stream.once("close", () => resolve(Buffer.concat(chunks)));
    });
}
