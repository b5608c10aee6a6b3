//! MCP over stdio: newline-delimited JSON-RPC on stdin and stdout.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::Value;

use crate::garbage;
use crate::mcp::{SAFETY_NET, Server, Sink};

/// Writes whole lines to stdout, one at a time across threads.
#[derive(Debug, Clone, Copy)]
struct Stdout<'a> {
    server: &'a Server,
}

impl Stdout<'_> {
    fn write_line(&self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        // The lock keeps other threads' lines out of this one.
        let mut out = std::io::stdout().lock();
        if let Err(err) = out.write_all(&bytes).and_then(|()| out.flush()) {
            eprintln!("fixture: writing stdout: {err}");
        }
    }
}

impl Sink for Stdout<'_> {
    fn send(&mut self, msg: &Value) {
        self.write_line(&msg.to_string());
    }

    fn after_handshake(&mut self) {
        if self.server.opts.garbage {
            for line in garbage::lines(self.server.opts.garbage_big) {
                self.write_line(&line);
            }
        }
    }
}

/// Reads stdin until its end, answering each request; `tools/call` runs on
/// a thread of its own. Returns at the end of stdin (unless `--stubborn`).
pub fn serve(server: &'static Server) {
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                eprintln!("fixture: reading stdin: {err}");
                break;
            }
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        server.log_received(&line);
        handle_line(server, &line);
        if server.opts.close_stdin_after_handshake && is_handshake(&line) {
            // Not reading now, so closing fd 0 closes the pipe's last read
            // end: the client's next write fails.
            drop(stdin);
            crate::sys::close_stdin();
            eprintln!("fixture: closed stdin after the handshake");
            std::thread::sleep(SAFETY_NET);
            return;
        }
    }
    if server.opts.stubborn {
        eprintln!("fixture: end of stdin ignored (--stubborn)");
        std::thread::sleep(SAFETY_NET.saturating_add(Duration::from_secs(1)));
    }
}

/// Whether `line` is a handshake request.
fn is_handshake(line: &[u8]) -> bool {
    serde_json::from_slice::<Value>(line).is_ok_and(|msg| {
        matches!(
            msg["method"].as_str(),
            Some("initialize" | "server/discover")
        )
    })
}

fn handle_line(server: &'static Server, line: &[u8]) {
    let msg: Value = match serde_json::from_slice(line) {
        Ok(msg) => msg,
        Err(err) => {
            eprintln!("fixture: ignoring a line that is not JSON: {err}");
            return;
        }
    };
    let Some(method) = msg["method"].as_str().map(str::to_owned) else {
        // A response to one of our requests (logged already), or nonsense.
        return;
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let Some(id) = msg.get("id").cloned() else {
        server.notification(&method, &params);
        return;
    };
    let mut sink = Stdout { server };
    // `crash` runs here, so that an end of stdin right behind it cannot
    // win the race and exit 0 first.
    if method == "tools/call" && params["name"] != "crash" {
        std::thread::spawn(move || server.request(&id, &method, &params, &mut sink));
    } else {
        server.request(&id, &method, &params, &mut sink);
    }
}
