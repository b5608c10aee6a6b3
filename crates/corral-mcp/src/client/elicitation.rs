//! How a client without a user answers the server's questions: an
//! elicitation handler ([`Elicitation`]), and the input a multi-round
//! request asks for (2026-07-28 `input_required` results: [`input_responses`]).
//!
//! A connection with a handler declares the `elicitation` capability and
//! answers `elicitation/create` with it, whether the server asks on the wire
//! (a request of its own) or inside an `input_required` result. Without
//! one, nothing is declared, and a server that asks anyway gets "method not
//! found" (on the wire) or the call fails saying what was asked (in a
//! result).

use std::{fmt, sync::Arc};

use serde_json::{Map, Value, json};

/// Answers an `elicitation/create` request: given its `params`, returns its
/// result (`{"action": "accept", "content": {...}}`, `decline` or
/// `cancel`).
///
/// The handler runs on the connection's reader task: it must answer at
/// once (a policy, not a prompt that waits for a person).
///
/// ```
/// use corral_mcp::client::{ConnectOptions, Elicitation};
/// use serde_json::json;
///
/// let mut options = ConnectOptions::default();
/// options.elicitation = Some(Elicitation::defaults());
/// // Or: decline every question; or a policy of your own.
/// options.elicitation = Some(Elicitation::decline());
/// options.elicitation = Some(Elicitation::new(|params| {
///     if params["message"].as_str().is_some_and(|m| m.contains("branch")) {
///         json!({"action": "accept", "content": {"branch": "main"}})
///     } else {
///         json!({"action": "decline"})
///     }
/// }));
/// ```
#[derive(Clone)]
pub struct Elicitation(Arc<dyn Fn(&Value) -> Value + Send + Sync>);

impl Elicitation {
    /// A handler of your own.
    pub fn new(handler: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Self {
        Self(Arc::new(handler))
    }

    /// Declines every request (`{"action": "decline"}`).
    pub fn decline() -> Self {
        Self::new(|_| json!({"action": "decline"}))
    }

    /// Accepts with the `default` of each field of the requested schema
    /// that has one (SEP-1034), leaving out those without; declines when a
    /// required field has no default.
    pub fn defaults() -> Self {
        Self::new(with_defaults)
    }

    /// The handler's answer to `params`.
    pub(crate) fn answer(&self, params: &Value) -> Value {
        (self.0)(params)
    }
}

// A handler that panics leaves nothing of the connection's state half-done
// (it computes an answer from its argument): connection options that carry
// one stay as unwind-safe as they were.
impl std::panic::UnwindSafe for Elicitation {}
impl std::panic::RefUnwindSafe for Elicitation {}

impl fmt::Debug for Elicitation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Elicitation(..)")
    }
}

/// The [`Elicitation::defaults`] policy.
fn with_defaults(params: &Value) -> Value {
    let schema = params.get("requestedSchema");
    let empty = Map::new();
    let properties = schema
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut content = Map::new();
    for (name, property) in properties {
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .and_then(|schema| schema.get("required"))
        .and_then(Value::as_array);
    let missing = required
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|name| !content.contains_key(name));
    if missing {
        json!({"action": "decline"})
    } else {
        json!({"action": "accept", "content": content})
    }
}

/// How many times one call answers the server's questions: its
/// `input_required` results, or its task's `tasks/update`s.
pub const MAX_INPUT_ROUNDS: u32 = 16;

/// The `inputResponses` of a retried request: an answer to each of the
/// server's `inputRequests`, by its key.
///
/// # Errors
/// A sentence naming a request this client cannot answer: an elicitation
/// without a handler, or sampling.
pub(crate) fn input_responses(
    requests: &Map<String, Value>,
    handler: Option<&Elicitation>,
) -> Result<Map<String, Value>, String> {
    let mut responses = Map::new();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        let response = match (method, handler) {
            ("elicitation/create", Some(handler)) => handler.answer(&params),
            ("roots/list", _) => json!({"roots": []}),
            _ => {
                return Err(format!(
                    "the server asks for input this client cannot give: {method:?} (input {key:?}){}",
                    if method == "elicitation/create" {
                        "; give an elicitation policy"
                    } else {
                        ""
                    }
                ));
            }
        };
        responses.insert(key.clone(), response);
    }
    Ok(responses)
}

#[cfg(test)]
mod tests;
