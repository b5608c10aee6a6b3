//! The HTTP headers that mirror a request's body (MCP 2026-07-28, streamable
//! HTTP, "Request Metadata"): pure functions of the body and of the tools'
//! input schemas, used by the HTTP writer.
//!
//! - `MCP-Protocol-Version` on every POST: the body's
//!   `_meta["io.modelcontextprotocol/protocolVersion"]` when it has one (so
//!   the two always match), else the version the handshake settled on.
//! - `Mcp-Method` on every request and notification: its `method`.
//! - `Mcp-Name` on `tools/call` and `prompts/get` (`params.name`),
//!   `resources/read` (`params.uri`) and the Tasks extension's `tasks/*`
//!   (`params.taskId`).
//! - `Mcp-Param-{Name}` on `tools/call`, for each parameter the tool's
//!   `inputSchema` annotates with `x-mcp-header` and the call gives a value
//!   (a string as is, an integer in decimal, a boolean as `true`/`false`;
//!   `null` or absent: no header).
//!
//! A value that is not safe as a plain header value (outside visible ASCII
//! and inner spaces, leading or trailing whitespace, or one that looks like
//! the sentinel itself) is sent as `=?base64?{Base64 of its UTF-8}?=`.
//!
//! A tool whose annotations break the rules (empty, not a token, not unique
//! regardless of case, on a type other than string, integer or boolean, or
//! anywhere but a chain of `properties` from the root) is rejected: the
//! client must exclude it from `tools/list` ([`annotations`] says why).

use std::collections::HashMap;

use serde_json::{Map, Value};

/// The body field whose value mirrors into `MCP-Protocol-Version`.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// One `x-mcp-header` annotation: the header's name part and the path of
/// `properties` keys to the annotated parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    pub header: String,
    pub path: Vec<String>,
}

/// The annotated parameters of each listed tool, by tool name.
pub(crate) type ToolParams = HashMap<String, Vec<Param>>;

/// The headers that mirror `frame` (one JSON-RPC message), in order: the
/// version (`version` when the body carries none), the method, the name,
/// and the tool's parameters from `tools`. Names are lowercase; values are
/// header-safe.
pub(crate) fn mirror(
    frame: &Value,
    version: Option<&str>,
    tools: &ToolParams,
) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    let params = frame.get("params");
    let in_body = params
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(META_VERSION))
        .and_then(Value::as_str);
    if let Some(version) = in_body.or(version) {
        headers.push(("mcp-protocol-version".into(), encode(version)));
    }
    let Some(method) = frame.get("method").and_then(Value::as_str) else {
        return headers;
    };
    headers.push(("mcp-method".into(), encode(method)));
    let name_field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        method if method.starts_with("tasks/") => "taskId",
        _ => return headers,
    };
    let Some(name) = params
        .and_then(|params| params.get(name_field))
        .and_then(Value::as_str)
    else {
        return headers;
    };
    headers.push(("mcp-name".into(), encode(name)));
    if method != "tools/call" {
        return headers;
    }
    let Some(arguments) = params.and_then(|params| params.get("arguments")) else {
        return headers;
    };
    for param in tools.get(name).into_iter().flatten() {
        let value = param
            .path
            .iter()
            .try_fold(arguments, |at, key| at.get(key))
            .and_then(header_value);
        if let Some(value) = value {
            headers.push((
                format!("mcp-param-{}", param.header.to_ascii_lowercase()),
                encode(&value),
            ));
        }
    }
    headers
}

/// A parameter's value as header text: `None` for `null`, and for what
/// cannot be mirrored (an object, an array, a fraction).
fn header_value(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => number
            .as_i64()
            .map(|n| n.to_string())
            .or_else(|| number.as_u64().map(|n| n.to_string())),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// `value` as a header value: as is when it is plain (visible ASCII and
/// inner spaces, no leading or trailing whitespace, not the sentinel's
/// shape), else `=?base64?…?=`.
pub(crate) fn encode(value: &str) -> String {
    let visible = value.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    if visible && !padded && !sentinel {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", base64(value.as_bytes()))
    }
}

/// Standard Base64 with padding (RFC 4648, section 4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> shift & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The `x-mcp-header` annotations of a tool's input schema, or why the
/// tool must be rejected.
///
/// # Errors
/// A sentence naming the annotation that breaks a rule.
pub(crate) fn annotations(schema: &Map<String, Value>) -> Result<Vec<Param>, String> {
    let mut found = Vec::new();
    walk(
        &Value::Object(schema.clone()),
        &mut Vec::new(),
        true,
        &mut found,
    )?;
    let mut seen: HashMap<String, &Param> = HashMap::new();
    for param in &found {
        if let Some(first) = seen.insert(param.header.to_ascii_lowercase(), param) {
            return Err(format!(
                "x-mcp-header {:?} on {} repeats {:?} on {} (names must be unique, \
                 regardless of case)",
                param.header,
                param.path.join("."),
                first.header,
                first.path.join(".")
            ));
        }
    }
    Ok(found)
}

/// Visits `node`; `reachable` is whether it is reached from the root by
/// `properties` keys only (`path`); the root itself is not a parameter.
fn walk(
    node: &Value,
    path: &mut Vec<String>,
    reachable: bool,
    found: &mut Vec<Param>,
) -> Result<(), String> {
    match node {
        Value::Object(map) => {
            if let Some(header) = map.get("x-mcp-header") {
                let at = if path.is_empty() {
                    "the schema's root".to_owned()
                } else {
                    path.join(".")
                };
                if !reachable || path.is_empty() {
                    return Err(format!(
                        "x-mcp-header at {at}, which is not a parameter reached by \
                         `properties` alone"
                    ));
                }
                found.push(check(header, map, &at, path)?);
            }
            for (key, child) in map {
                if key == "properties"
                    && let Value::Object(properties) = child
                {
                    for (name, property) in properties {
                        path.push(name.clone());
                        walk(property, path, reachable, found)?;
                        path.pop();
                    }
                } else if key != "x-mcp-header" {
                    path.push(key.clone());
                    walk(child, path, false, found)?;
                    path.pop();
                }
            }
            Ok(())
        }
        Value::Array(items) => {
            for item in items {
                walk(item, path, false, found)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// One annotation on a reachable parameter: its name and its type.
fn check(
    header: &Value,
    property: &Map<String, Value>,
    at: &str,
    path: &[String],
) -> Result<Param, String> {
    let Some(header) = header.as_str() else {
        return Err(format!("x-mcp-header at {at} is not a string"));
    };
    if header.is_empty() {
        return Err(format!("x-mcp-header at {at} is empty"));
    }
    if let Some(bad) = header.chars().find(|c| !is_tchar(*c)) {
        return Err(format!(
            "x-mcp-header {header:?} at {at} has {bad:?}, which is not allowed in a header name"
        ));
    }
    let kind = property.get("type").and_then(Value::as_str);
    if !matches!(kind, Some("string" | "integer" | "boolean")) {
        return Err(format!(
            "x-mcp-header {header:?} at {at} is on a parameter of type {}, not string, \
             integer or boolean",
            property
                .get("type")
                .map_or_else(|| "(none)".to_owned(), Value::to_string)
        ));
    }
    Ok(Param {
        header: header.to_owned(),
        path: path.to_vec(),
    })
}

/// RFC 9110 `tchar`.
fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

#[cfg(test)]
mod tests;
