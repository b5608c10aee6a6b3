//! The MCP server itself, independent of the transport: the handshakes, the
//! tools, cancellation and the received-message log.

use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::options::Options;

/// The protocol version of the `server/discover` era.
const MODERN: &str = "2026-07-28";
/// The `initialize` versions the fixture accepts; the first is its default.
const LEGACY: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The longest any wait lasts ("forever"), so nothing leaks for good.
pub const SAFETY_NET: Duration = Duration::from_secs(600);
/// How often waits check for cancellation.
const POLL: Duration = Duration::from_millis(10);

/// Where the messages about one request go.
pub trait Sink {
    /// Writes one message (an answer or a notification).
    fn send(&mut self, msg: &Value);
    /// Whether the peer gave up on the request (an HTTP stream it closed).
    fn closed(&mut self) -> bool {
        false
    }
    /// Called right after a successful handshake answer was sent.
    fn after_handshake(&mut self) {}
}

/// The server's state, shared by every thread.
#[derive(Debug)]
pub struct Server {
    pub opts: Options,
    /// Ids (as JSON text) named by `notifications/cancelled`.
    cancelled: Mutex<HashSet<String>>,
    log: Option<Mutex<File>>,
}

impl Server {
    pub fn new(opts: Options, log: Option<File>) -> Self {
        Self {
            opts,
            cancelled: Mutex::default(),
            log: log.map(Mutex::new),
        }
    }

    /// Appends one received line (without its newline) to `--log`.
    pub fn log_received(&self, line: &[u8]) {
        if let Some(log) = &self.log {
            let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
            let mut bytes = line.to_vec();
            bytes.push(b'\n');
            let _ = file.write_all(&bytes).and_then(|()| file.flush());
        }
    }

    /// Writes `fixture: TEXT` to stderr and to `--log`.
    pub fn note(&self, text: &str) {
        let line = format!("fixture: {text}");
        eprintln!("{line}");
        self.log_received(line.as_bytes());
    }

    /// Handles a notification from the client.
    pub fn notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            let id = params["requestId"].to_string();
            self.cancelled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id);
        }
    }

    pub fn is_cancelled(&self, id: &Value) -> bool {
        self.cancelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&id.to_string())
    }

    /// Answers the request `id` (on this thread; `tools/call` may take long).
    pub fn request(&self, id: &Value, method: &str, params: &Value, sink: &mut dyn Sink) {
        match method {
            "server/discover" | "initialize" => self.handshake(id, method, params, sink),
            "ping" => sink.send(&result(id, json!({}))),
            "tools/list" => sink.send(&result(id, tools())),
            "tools/call" => self.call(id, params, sink),
            _ => sink.send(&error(id, -32601, "method not found")),
        }
    }

    fn handshake(&self, id: &Value, method: &str, params: &Value, sink: &mut dyn Sink) {
        let o = &self.opts;
        if o.exit_in_handshake {
            eprintln!("fixture: exiting during the handshake");
            std::process::exit(1);
        }
        std::thread::sleep(o.handshake_delay);
        let discover = method == "server/discover";
        let answer = if o.handshake_error {
            eprintln!("fixture: refusing the handshake (HANDSHAKE-TAIL-MARKER)");
            error(id, -32603, "fixture refuses the handshake")
        } else if discover && o.discover_silent {
            return;
        } else if discover && o.legacy {
            error(id, o.discover_error_code, "method not found")
        } else if discover {
            result(id, discover_result())
        } else {
            let asked = params["protocolVersion"].as_str();
            let version = asked.filter(|v| LEGACY.contains(v)).unwrap_or(LEGACY[0]);
            result(id, initialize_result(version))
        };
        let ok = answer.get("result").is_some();
        sink.send(&answer);
        if ok {
            sink.after_handshake();
            if o.die_after_handshake {
                std::process::exit(0);
            }
        }
    }

    fn call(&self, id: &Value, params: &Value, sink: &mut dyn Sink) {
        if let (Some(hold), Some(_)) = (self.opts.hold, &self.opts.http)
            && !self.wait(id, Some(hold), None, sink)
        {
            return;
        }
        let args = &params["arguments"];
        let (text, is_error) = match params["name"].as_str().unwrap_or_default() {
            "echo" => (
                args["message"].as_str().unwrap_or_default().to_owned(),
                false,
            ),
            "sleep" => {
                let secs = args["seconds"].as_f64().unwrap_or(0.0);
                let total = Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO);
                let token = params["_meta"].get("progressToken");
                if !self.wait(id, Some(total), token, sink) {
                    return;
                }
                ("slept".to_owned(), false)
            }
            "crash" => std::process::exit(70),
            "silent" => {
                self.wait(id, None, None, sink);
                return;
            }
            other => (format!("unknown tool {other}"), true),
        };
        if self.is_cancelled(id) {
            return;
        }
        let answer = result(
            id,
            json!({ "content": [{ "type": "text", "text": text }], "isError": is_error }),
        );
        for _ in 0..if self.opts.garbage { 2 } else { 1 } {
            sink.send(&answer);
        }
    }

    /// Waits `total` (or "forever": [`SAFETY_NET`]), sending progress
    /// notifications for `token` every `--progress-ms`. False if the request
    /// was abandoned (cancelled, its stream closed) or the wait was forever.
    fn wait(
        &self,
        id: &Value,
        total: Option<Duration>,
        token: Option<&Value>,
        sink: &mut dyn Sink,
    ) -> bool {
        let start = Instant::now();
        let end = start + total.unwrap_or(SAFETY_NET);
        let progress = token.zip(self.opts.progress);
        let mut next = progress.map(|(_, every)| start + every);
        let mut count = 0u64;
        loop {
            // A closed stream is noted even when a cancellation came too.
            if sink.closed() || self.is_cancelled(id) {
                return false;
            }
            let now = Instant::now();
            if now >= end {
                return total.is_some();
            }
            if let (Some((token, every)), Some(at)) = (progress, next)
                && now >= at
            {
                count += 1;
                sink.send(&json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": { "progressToken": token, "progress": count },
                }));
                next = Some(at + every);
            }
            let until = next.map_or(end, |at| at.min(end));
            std::thread::sleep(until.saturating_duration_since(now).min(POLL));
        }
    }
}

/// A success response.
pub fn result(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

fn discover_result() -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": [MODERN],
        "capabilities": { "tools": {} },
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": { "io.modelcontextprotocol/serverInfo": { "name": "mcp-fixture", "version": "0" } },
    })
}

fn initialize_result(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "mcp-fixture", "version": "0" },
    })
}

fn tools() -> Value {
    let empty = json!({ "type": "object", "properties": {} });
    json!({ "tools": [
        {
            "name": "echo",
            "description": "Returns the message.",
            "inputSchema": {
                "type": "object",
                "properties": { "message": { "type": "string" } },
                "required": ["message"],
            },
        },
        {
            "name": "sleep",
            "description": "Sleeps for the given seconds (with progress if asked), then says \"slept\".",
            "inputSchema": {
                "type": "object",
                "properties": { "seconds": { "type": "number" } },
                "required": ["seconds"],
            },
        },
        { "name": "crash", "description": "Exits with status 70 without answering.", "inputSchema": empty },
        { "name": "silent", "description": "Never answers.", "inputSchema": empty },
    ]})
}
