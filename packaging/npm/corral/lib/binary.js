"use strict";
// Where corral's native binary is: the platform package npm installed as an
// optional dependency (the way esbuild and biome ship theirs), or
// CORRAL_BINARY_PATH. Shared by the launcher (bin/corral), the postinstall
// (install.js) and the module (lib/index.mjs).

const path = require("path");

/** The platform packages, by `process.platform process.arch`. */
const PLATFORMS = {
    "linux x64": "@corral-run/linux-x64",
};

/** This package's name, for messages. */
const MAIN = "@corral-run/corral";

/** The platform package that fits this machine, or undefined. */
function platformPackage() {
    return PLATFORMS[`${process.platform} ${process.arch}`];
}

/**
 * The path of the corral binary to run.
 * @throws {Error} with code CORRAL_NO_BINARY and a message naming the fix.
 */
function binaryPath() {
    const override = process.env.CORRAL_BINARY_PATH;
    if (override) {
        return override;
    }
    const pkg = platformPackage();
    if (!pkg) {
        throw noBinary(
            `${MAIN} has no corral binary for ${process.platform}-${process.arch} ` +
                `(it ships ${Object.keys(PLATFORMS).map((key) => key.replace(" ", "-")).join(", ")} only). ` +
                "Build corral from source (cargo install --locked corral-cli, on Linux) " +
                "and set CORRAL_BINARY_PATH to the binary",
        );
    }
    let dir;
    try {
        dir = path.dirname(require.resolve(`${pkg}/package.json`));
    } catch {
        throw noBinary(
            `${pkg}, the package with corral's binary for ${process.platform}-${process.arch}, ` +
                `is not installed. It is an optional dependency of ${MAIN}: npm leaves it out ` +
                "with --omit=optional (--no-optional) or with a lockfile made without it. " +
                `Reinstall without those (npm install ${MAIN}), or set CORRAL_BINARY_PATH ` +
                "to a corral binary",
        );
    }
    return path.join(dir, "bin", "corral");
}

function noBinary(message) {
    const error = new Error(message);
    error.code = "CORRAL_NO_BINARY";
    return error;
}

module.exports = { binaryPath, platformPackage, PLATFORMS, MAIN };
