//! What the reader does with one frame from the server, whatever the
//! transport: an answer settles its call, a progress notification extends
//! its call's idle deadline, a request is answered (`ping`, and
//! `elicitation/create` by the connection's handler, if it has one) or
//! refused (method not found), and anything malformed is dropped and counted. Never
//! an error: a bad frame must not end the read loop.

use serde_json::{Value, json};

use super::shared::{Core, Reply, bump, lock};
use crate::message::{Id, Malformed, Message, classify};

/// JSON-RPC "method not found".
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;

/// Handles one frame.
pub(crate) fn dispatch(core: &Core, line: &[u8]) {
    let counters = &core.counters;
    let message = match classify(line) {
        Ok(message) => message,
        Err(malformed) => {
            tracing::debug!(%malformed, "dropped a malformed frame from the server");
            bump(match malformed {
                Malformed::NotUtf8 { .. } | Malformed::NotJson(_) => &counters.not_json,
                Malformed::NotObject(_) => &counters.not_object,
                Malformed::BadId(_) | Malformed::NullId => &counters.bad_id,
                Malformed::BadMethod(_) => &counters.bad_method,
                Malformed::TooLong { .. } => &counters.too_long,
                Malformed::Duplicate(_) | Malformed::NotAMessage(_) => &counters.not_a_message,
            });
            return;
        }
    };
    match message {
        Message::Response { id: Some(id) } => {
            let Some(reply) = reply_of(line) else {
                bump(&counters.not_a_message);
                return;
            };
            if core.settle(&id, reply) {
                bump(&counters.messages);
            } else {
                tracing::debug!(%id, "dropped an answer no call waits for");
                bump(&counters.unknown_id);
            }
        }
        Message::Response { id: None } => bump(&counters.unknown_id),
        Message::Request { id, method } => {
            bump(&counters.messages);
            bump(&counters.server_requests);
            let elicit = (method == "elicitation/create")
                .then(|| lock(&core.elicitation).clone())
                .flatten();
            let answer = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else if let Some(handler) = elicit {
                let params = serde_json::from_slice::<Value>(line)
                    .ok()
                    .and_then(|mut frame| frame.get_mut("params").map(Value::take))
                    .unwrap_or(Value::Null);
                json!({"jsonrpc": "2.0", "id": id, "result": handler.answer(&params)})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": METHOD_NOT_FOUND,
                    "message": format!("method not found: this client does not serve {method:?}"),
                }})
            };
            let sent = serde_json::to_vec(&answer).is_ok_and(|line| core.try_answer(line));
            if !sent {
                bump(&counters.answers_dropped);
            }
        }
        Message::Notification { method, .. } => {
            bump(&counters.messages);
            if method == "notifications/progress"
                && let Some(token) = progress_token(line)
            {
                core.progress(&token);
            }
        }
    }
}

/// The answer in a response frame: `result`, or `error` with an integer
/// code and a string message. `None` for a frame with both or neither, or a
/// malformed error object.
fn reply_of(line: &[u8]) -> Option<Reply> {
    let Value::Object(mut frame) = serde_json::from_slice(line).ok()? else {
        return None;
    };
    match (frame.remove("result"), frame.remove("error")) {
        (Some(result), None) => Some(Reply::Result(result)),
        (None, Some(Value::Object(mut error))) => {
            let code = error.get("code").and_then(Value::as_i64)?;
            let Some(Value::String(message)) = error.remove("message") else {
                return None;
            };
            Some(Reply::Error {
                code,
                message,
                data: error.remove("data"),
            })
        }
        _ => None,
    }
}

/// `params.progressToken` of a progress notification, as an id.
fn progress_token(line: &[u8]) -> Option<Id> {
    let frame: Value = serde_json::from_slice(line).ok()?;
    match frame.get("params")?.get("progressToken")? {
        Value::Number(n) => n.as_i64().map(|n| Id::Number(i128::from(n))),
        Value::String(s) => Some(Id::String(s.clone())),
        _ => None,
    }
}

/// `notifications/cancelled` for `id` (without the newline).
pub(crate) fn cancelled_notification(id: &Id, reason: &str) -> Vec<u8> {
    let frame = json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": reason},
    });
    serde_json::to_vec(&frame).unwrap_or_default()
}

#[cfg(test)]
mod tests;
