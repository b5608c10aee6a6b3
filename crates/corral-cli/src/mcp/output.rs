//! What `corral mcp call` and `corral mcp list` print: the answer as text,
//! or one JSON envelope (`--json`, schema in `corral mcp call --help` and
//! `docs/mcp.md`), and the reason of a failure on standard error.
//!
//! Everything a server chose (its error bodies and messages, the `Location`
//! of a redirect, its version, a tool's text, its standard error) is escaped
//! for the terminal with [`text`](crate::text) before it is printed; the
//! `--json` envelope carries it as it came, JSON-escaped.

use std::{
    ffi::OsString,
    io::{self, Write},
    time::{Duration, SystemTime},
};

use corral_mcp::client::{CallError, ConnectError, ReadStats};
use serde::Serialize;
use serde_json::Value;

use crate::{
    kit::{
        exit::{CallOutcome, Status},
        report::{Cleanup, VERSION, tell_leftovers},
    },
    mcp::session::{Done, Failure},
    text::{printable, printable_json, printable_lines},
};

/// The `--json` envelope of `corral mcp call` and `corral mcp list`.
#[derive(Debug, Serialize)]
pub struct Envelope {
    /// Always [`VERSION`].
    pub version: u32,
    /// The server command (lossy UTF-8); empty with `--url`.
    pub command: Vec<String>,
    /// The HTTP endpoint (`--url`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// How the request ended.
    pub outcome: CallOutcome,
    /// The status corral exits with.
    pub exit_status: u8,
    /// The request's id (of the last page for `list`), to find it in the
    /// server's log; `null` when it was not sent.
    pub request_id: Option<Value>,
    /// The server's result: the `CallToolResult` (call) or `{"tools": [...]}`
    /// (list); `null` without one.
    pub result: Option<Value>,
    /// Why there is no result (or the JSON-RPC error the server answered).
    pub error: Option<ErrorDetail>,
    /// What the cleanup of the server's tree did (as in `corral run`'s
    /// report); all empty if there was no tree (`--url`), and with a note
    /// if the server did not start or never connected.
    pub cleanup: Cleanup,
    /// What the client read from the server, dropped and answered (the
    /// counters of `corral_mcp::client::ReadStats`), once it connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadStats>,
    /// The task the call ran as (`--task`), or the one `corral mcp task`
    /// read or cancelled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// How that task stands: `completed`, `failed`, `cancelled`, `working`,
    /// `given_up` (corral sent `tasks/cancel`) or `lost`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_status: Option<&'static str>,
}

/// The `error` of the envelope.
#[derive(Debug, Serialize)]
pub struct ErrorDetail {
    /// What happened, with its causes.
    pub message: String,
    /// The JSON-RPC error code, if the server answered with an error.
    pub code: Option<i64>,
    /// The JSON-RPC error's `data`, if any.
    pub data: Option<Value>,
    /// When the request was written (seconds since the epoch), if it was
    /// and no answer came.
    pub written_at: Option<f64>,
}

/// Prints what `done` says (`json`: the envelope) and returns the exit
/// status. `what` names the request in messages.
pub fn finish(
    command: &[OsString],
    url: Option<&str>,
    what: &str,
    json: bool,
    final_bound: Duration,
    done: Done,
    text: impl FnOnce(&Value) -> String,
) -> Status {
    let outcome = done.outcome();
    let status = Status::of_call(outcome);
    let received = done
        .received
        .map(|signal| format!(" ({signal} received)"))
        .unwrap_or_default();
    let mut error = None;
    let mut request_id = done
        .request_id
        .as_ref()
        .and_then(|id| serde_json::to_value(id).ok());
    let cleanup = cleanup(&done, url.is_some(), final_bound);
    let read = done.teardown.as_ref().map(|teardown| teardown.stats);
    let (task_id, task_status) = (done.task_id.clone(), done.task_status);
    if let Some(read) = read
        && read.answers_dropped > 0
    {
        say!(
            "{what}: the server sent {} requests of its own; {} answers to them were dropped \
             (a full queue, or over HTTP too many already on their way)",
            read.server_requests,
            read.answers_dropped
        );
    }
    let result = match done.answer {
        Ok(value) => Some(value),
        Err(failure) => {
            let detail = detail(failure);
            say!("{what}: {}{received}", detail.said);
            if let Some(id) = detail.request_id.clone() {
                request_id = Some(id);
            }
            error = Some(detail.error);
            None
        }
    };
    if outcome == CallOutcome::ToolError {
        say!("{what}: the tool reported an error (isError)");
    }
    let printed = if json {
        let envelope = Envelope {
            version: VERSION,
            command: command
                .iter()
                .map(|arg| arg.to_string_lossy().into_owned())
                .collect(),
            url: url.map(str::to_owned),
            outcome,
            exit_status: status.code(),
            request_id,
            result,
            error,
            cleanup,
            read,
            task_id,
            task_status,
        };
        let json = serde_json::to_string_pretty(&envelope).unwrap_or_default();
        printable_json(&json).into_owned()
    } else {
        result.as_ref().map(text).unwrap_or_default()
    };
    print(&printed);
    status
}

/// What the cleanup of the server's tree did. Over HTTP (`http`) there is
/// no tree, and nothing is said about one; from a stdio server without a
/// cleanup report, a note says why there is none.
fn cleanup(done: &Done, http: bool, final_bound: Duration) -> Cleanup {
    if let Some(finished) = done.teardown.as_ref().and_then(|t| t.finished.as_ref()) {
        tell_leftovers(&finished.report, "of the server ", "", final_bound);
        return Cleanup::of(finished, Vec::new());
    }
    if http {
        return Cleanup::default();
    }
    let note = match &done.answer {
        Err(Failure::Setup(_)) => "the server was not started",
        Err(Failure::Connect(ConnectError::Spawn(_) | ConnectError::NoCommand)) => {
            "the server could not be started: nothing of it runs, and no cleanup report came back"
        }
        Err(Failure::Connect(_)) => {
            "the server never connected: its tree was ended before the connect failed, \
             and no cleanup report came back"
        }
        _ => "no cleanup report came back: the runtime stopped before the teardown finished",
    };
    Cleanup {
        notes: vec![note.into()],
        ..Cleanup::default()
    }
}

/// The envelope's `error` and the request id of a failure.
struct Detailed {
    /// The message as said on standard error: escaped for the terminal,
    /// the server's standard error (a stdio handshake's) on lines of its own.
    said: String,
    request_id: Option<Value>,
    error: ErrorDetail,
}

fn detail(failure: Failure) -> Detailed {
    let mut error = ErrorDetail {
        message: String::new(),
        code: None,
        data: None,
        written_at: None,
    };
    let mut request_id = None;
    let said = match &failure {
        Failure::Connect(ConnectError::Handshake { why, stderr }) if !stderr.trim().is_empty() => {
            Some(format!(
                "the MCP handshake failed: {}\nthe server's standard error ended with:\n{}",
                printable(why),
                printable_lines(stderr.trim_end())
            ))
        }
        _ => None,
    };
    error.message = match failure {
        Failure::Setup(cause) => format!("{cause:#}"),
        Failure::Connect(cause) => format!("{:#}", anyhow::Error::new(cause)),
        Failure::Call(cause) => {
            let message = cause.to_string();
            match cause {
                CallError::Rpc { code, data, .. } => {
                    error.code = Some(code);
                    error.data = data;
                }
                CallError::OutcomeUnknown {
                    request_id: id,
                    written_at,
                    ..
                } => {
                    request_id = serde_json::to_value(id).ok();
                    error.written_at = written_at
                        .duration_since(SystemTime::UNIX_EPOCH)
                        .ok()
                        .map(|since| since.as_secs_f64());
                }
                _ => {}
            }
            message
        }
    };
    let said = said.unwrap_or_else(|| printable(&error.message).into_owned());
    Detailed {
        said,
        request_id,
        error,
    }
}

/// The text of a tool's result: its text blocks joined by newlines (escaped
/// for the terminal, newlines and tabs kept), or its `structuredContent` as
/// JSON if it has none.
pub fn call_text(result: &Value) -> String {
    let texts: Vec<&str> = result["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect();
    if texts.is_empty()
        && let Some(structured) = result.get("structuredContent")
    {
        return printable_json(&structured.to_string()).into_owned();
    }
    printable_lines(&texts.join("\n")).into_owned()
}

/// The tools, one per line: the name, two spaces or more, the first line
/// of the description; escaped for the terminal (the server's words).
pub fn list_text(result: &Value) -> String {
    let tools = result["tools"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let rows: Vec<(String, String)> = tools
        .iter()
        .map(|tool| {
            let name = printable(tool["name"].as_str().unwrap_or_default()).into_owned();
            let description = tool["description"].as_str().unwrap_or_default();
            let first = description.lines().next().unwrap_or_default().trim();
            (name, printable(first).into_owned())
        })
        .collect();
    let width = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0);
    rows.iter()
        .map(|(name, description)| {
            format!("{name:<width$}  {description}")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Writes `text` and a final newline (none for no text) to standard output;
/// a closed output is not an error of the request.
fn print(text: &str) {
    if text.is_empty() {
        return;
    }
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = stdout.write_all(b"\n");
    }
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_blocks_are_joined_by_newlines_and_others_skipped() {
        let result = json!({"content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "text", "text": "two"},
        ]});
        assert_eq!(call_text(&result), "one\ntwo");
    }

    #[test]
    fn structured_content_is_printed_when_there_is_no_text() {
        let result = json!({"content": [], "structuredContent": {"a": 1}});
        assert_eq!(call_text(&result), r#"{"a":1}"#);
    }

    #[test]
    fn tools_are_listed_with_the_first_line_of_their_description_escaped() {
        let result = json!({"tools": [
            {"name": "echo", "description": "Echoes.\nMore.", "inputSchema": {}},
            {"name": "long-name", "inputSchema": {}},
            {"name": "evil", "description": "\u{1b}[31mred", "inputSchema": {}},
        ]});
        let text = list_text(&result);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "echo       Echoes.");
        assert_eq!(lines[1], "long-name");
        assert!(!lines[2].contains('\u{1b}'), "{text:?}");
    }
}
