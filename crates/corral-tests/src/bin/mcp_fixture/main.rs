//! `mcp-fixture`: a misbehaving MCP server for corral-mcp's tests.
//!
//! Speaks newline-delimited JSON-RPC 2.0 on stdin/stdout (or streamable HTTP
//! with `--http`), in both eras: `server/discover` (2026-07-28) and the
//! legacy `initialize` handshake. Logs go to stderr; stdout carries only MCP
//! messages (and, with `--http`, one `listening` line). Tools: `echo
//! {message}`, `sleep {seconds}` (progress every `--progress-ms` if the call
//! has a `progressToken`), `crash` (exit 70 at once), `silent` (never
//! answers). Calls run concurrently; `notifications/cancelled` abandons one.
//! End of stdin exits 0. Anything "forever" ends after 600 s.
//!
//! | flag | behaviour |
//! |------|-----------|
//! | `--log FILE` | append every received line (HTTP: request body) to FILE, flushed per line; also `fixture: stream closed for request ID` and `fixture: cancelled request ID before its stream closed` |
//! | `--pids FILE` | write `{"server":{pid,start_time},"helpers":[{pid,start_time,role}..]}` atomically (FILE.tmp + rename) after the helpers started |
//! | `--spawn-log FILE` | append this process's pid and a newline to FILE at start (one O_APPEND write) |
//! | `--helpers` | start `setsid_child` (`sleep 3600` in its own session, holding stdout and stderr), `term_ignorer` (ignores SIGTERM), `daemon` (double fork, setsid, stdio on /dev/null) |
//! | `--handshake-delay-ms N` | wait N ms before answering `server/discover` and `initialize` |
//! | `--legacy` | answer `server/discover` with error `--discover-error-code C` (default -32601) |
//! | `--discover-silent` | never answer `server/discover` |
//! | `--handshake-error` | write `fixture: refusing the handshake (HANDSHAKE-TAIL-MARKER)` on stderr, answer both handshakes with error -32603 |
//! | `--exit-in-handshake` | on either handshake: `fixture: exiting during the handshake` on stderr, exit 1 |
//! | `--die-after-handshake` | exit 0 right after a successful handshake answer |
//! | `--stubborn` | ignore SIGTERM and the end of stdin |
//! | `--garbage` | after the handshake answer: malformed lines, stray responses, a `--garbage-big BYTES` (default 2 MiB) line, two server requests; every `tools/call` answer twice. HTTP: the same as SSE events (plus `{"jsonrpc":"2.0","id":1}` and `: keepalive`) before the answer of every non-handshake request |
//! | `--progress-ms N` | progress notification period of `sleep` |
//! | `--http ADDR` | serve `POST /mcp` (SSE answers), `DELETE /mcp` (200, noted as `session deleted`), `GET /mcp` (405), else 400; stdin is not read; each request's `Mcp-Session-Id`, `MCP-Protocol-Version` and `Authorization` noted as `METHOD headers: name=value ...` |
//! | `--hold-ms N` | HTTP: send the headers of a `tools/call` answer, then nothing for N ms; a request cancelled meanwhile is never answered, and its stream stays open until the client closes it |
//!
//! Bad arguments: a usage line on stderr, exit 2.

mod garbage;
mod http;
mod identity;
mod mcp;
mod options;
mod stdio;
mod sys;

use std::fs::OpenOptions;

use mcp::Server;
use options::{Options, USAGE};

fn main() {
    let opts = match Options::parse(std::env::args().skip(1)) {
        Ok(opts) => opts,
        Err(err) => {
            eprintln!("mcp-fixture: {err}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(err) = run(opts) {
        eprintln!("mcp-fixture: {err}");
        std::process::exit(1);
    }
}

fn run(opts: Options) -> std::io::Result<()> {
    if opts.stubborn {
        sys::ignore_sigterm();
    }
    if let Some(path) = &opts.spawn_log {
        identity::log_spawn(path)?;
    }
    // Before any thread exists: starting the daemon forks.
    let helpers = if opts.helpers {
        identity::start_helpers()?
    } else {
        Vec::new()
    };
    if let Some(path) = &opts.pids {
        identity::write_pids(path, &helpers)?;
    }
    let log = match &opts.log {
        Some(path) => Some(OpenOptions::new().create(true).append(true).open(path)?),
        None => None,
    };
    let http = opts.http.clone();
    let server: &'static Server = Box::leak(Box::new(Server::new(opts, log)));
    match http {
        Some(addr) => http::serve(server, &addr),
        None => {
            stdio::serve(server);
            Ok(())
        }
    }
}
