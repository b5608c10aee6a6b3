//! What `--garbage` writes: malformed lines, stray responses, a huge line and
//! two server requests.

/// The malformed and stray messages, in the order they are written.
const SHAPES: [&str; 8] = [
    "this is not json",
    "[1,2,3]",
    "\"a string\"",
    "42",
    r#"{"jsonrpc":"2.0","id":{"x":1},"result":{}}"#,
    r#"{"jsonrpc":"2.0","id":true,"result":{}}"#,
    r#"{"jsonrpc":"2.0","method":5}"#,
    r#"{"jsonrpc":"2.0","id":987654321,"result":{}}"#,
];

/// The server requests, after the huge line.
const REQUESTS: [&str; 2] = [
    r#"{"jsonrpc":"2.0","id":"srv-ping","method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":"srv-unknown","method":"sampling/createMessage","params":{}}"#,
];

/// A message with neither `result` nor `error` (only sent over HTTP).
pub const SCHEMA_INVALID: &str = r#"{"jsonrpc":"2.0","id":1}"#;

/// Every garbage line (without newlines): [`SHAPES`], a
/// `notifications/message` padded to `big` bytes (longer only if `big` is
/// smaller than its skeleton), then [`REQUESTS`].
pub fn lines(big: usize) -> Vec<String> {
    let head = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":""#;
    let tail = r#""}}"#;
    let pad = big.saturating_sub(head.len() + tail.len());
    let huge = format!("{head}{}{tail}", "x".repeat(pad));
    let mut lines: Vec<String> = SHAPES.iter().map(|s| (*s).to_owned()).collect();
    lines.push(huge);
    lines.extend(REQUESTS.iter().map(|s| (*s).to_owned()));
    lines
}
