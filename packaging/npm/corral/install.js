"use strict";
// The postinstall of @corral-run/corral: puts the platform package's native
// binary in place of the JS launcher bin/corral, so that the `corral` npm
// links on PATH is corral itself, with no node process between the caller
// and the supervisor (as esbuild's install.js does). The binary is checked
// first (it runs, `--version` names this package's version). Anything that
// goes wrong leaves the launcher, which works as well; never an install
// failure. Skipped when CORRAL_BINARY_PATH is set (the launcher honours it).

const { execFileSync } = require("child_process");
const fs = require("fs");
const path = require("path");
const { binaryPath } = require("./lib/binary.js");
const { version } = require("./package.json");

const launcher = path.join(__dirname, "bin", "corral");

function install() {
    if (process.env.CORRAL_BINARY_PATH) {
        return "CORRAL_BINARY_PATH is set; bin/corral stays the launcher, which runs that binary";
    }
    const binary = binaryPath();
    const said = execFileSync(binary, ["--version"], { encoding: "utf8" });
    if (!said.startsWith(`corral ${version}`)) {
        throw new Error(`${binary} --version says ${JSON.stringify(said.trim())}, not corral ${version}`);
    }
    // A hard link where possible (no second copy), else a copy; then one
    // rename over the launcher, so bin/corral is never half written.
    const temp = `${launcher}.tmp-${process.pid}`;
    try {
        fs.linkSync(binary, temp);
    } catch {
        fs.copyFileSync(binary, temp);
    }
    fs.chmodSync(temp, 0o755);
    fs.renameSync(temp, launcher);
    return null;
}

try {
    const kept = install();
    if (kept) {
        process.stderr.write(`@corral-run/corral: ${kept}\n`);
    }
} catch (error) {
    process.stderr.write(
        `@corral-run/corral: keeping the JS launcher as bin/corral (${error.message.split("\n")[0]})\n`,
    );
}
