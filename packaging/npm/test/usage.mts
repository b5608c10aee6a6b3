// What a TypeScript user of @corral-run/corral writes, type-checked by
// scripts/package-npm (tsc --noEmit, strict) against lib/index.d.mts and the
// MCP TypeScript SDK's own types; never run. The @ts-expect-error lines are
// mistakes the types must refuse.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport, type StdioServerParameters } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
    CorralError,
    corralPath,
    guardedStdio,
    run,
    type Report,
    type RunResult,
} from "@corral-run/corral";

export async function example(): Promise<void> {
    // guardedStdio takes and gives the SDK's StdioServerParameters.
    const params: StdioServerParameters = {
        command: "python3",
        args: ["server.py"],
        env: { A: "1" },
        cwd: "/",
        stderr: "inherit",
    };
    const guarded: StdioServerParameters = guardedStdio(params, { killAfter: 1, closeGrace: "2s" });
    const client = new Client({ name: "example", version: "1.0.0" });
    await client.connect(new StdioClientTransport(guarded));
    await client.close();

    const outcome: RunResult<string> = await run(["sh", "-c", "make test"], {
        timeout: "10m",
        killAfter: 5,
        signal: "INT",
        abortSignal: new AbortController().signal,
        input: "yes\n",
        extraArgs: ["--max-memory", "2G"],
    });
    const status: number = outcome.exitStatus;
    const report: Report = outcome.report;
    if (report.outcome.kind === "exited") {
        const code: number = report.outcome.code;
        void code;
    }
    const survivors: number[] = report.survivors.map((process) => process.pid);
    const bytes: Buffer = (await run(["true"], { encoding: "buffer" })).stdout;
    const path: string = corralPath();
    void [status, survivors, bytes, path];

    try {
        await run(["no-such-command"]);
    } catch (error) {
        if (error instanceof CorralError) {
            const failed: number | null = error.exitStatus;
            const itsReport: Report | null = error.report;
            void [failed, itsReport];
        }
    }

    // @ts-expect-error: argv is strings
    await run([1]);
    // @ts-expect-error: signal is corral's first signal, not an AbortSignal
    await run(["true"], { signal: new AbortController().signal });
    // @ts-expect-error: a server needs a command
    guardedStdio({ args: ["server.py"] });
}
