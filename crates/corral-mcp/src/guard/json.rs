//! JSON and JSONC (comments, trailing commas) read with the byte span of
//! every value, so that an edit replaces only the bytes of the values it
//! changes: unknown keys, key order, indentation, line endings and comments
//! stay as they were.

use std::ops::Range;

/// The deepest nesting read; deeper input is refused rather than risking
/// the stack.
const MAX_DEPTH: usize = 128;

/// A value and the bytes it spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The value's bytes in the text (a string's include its quotes).
    pub span: Range<usize>,
    /// What it is.
    pub kind: Kind,
}

/// The kinds of value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An object's members, in order.
    Object(Vec<Member>),
    /// An array's elements.
    Array(Vec<Node>),
    /// A string, unescaped.
    String(String),
    /// A number, `true`, `false` or `null`.
    Other,
}

/// One `"key": value` of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The key, unescaped.
    pub key: String,
    /// The key's bytes, quotes included.
    pub key_span: Range<usize>,
    /// The value.
    pub value: Node,
}

/// Why a text is not JSON: what, and the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// The line (1-based).
    pub line: usize,
    /// What was wrong there.
    pub message: String,
}

impl Node {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Member> {
        match &self.kind {
            Kind::Object(members) => members.iter().rev().find(|m| m.key == key),
            _ => None,
        }
    }

    /// The string value, if a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::String(s) => Some(s),
            _ => None,
        }
    }

    #[cfg(test)]
    /// The elements, if an array.
    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The members, if an object.
    pub fn as_object(&self) -> Option<&[Member]> {
        match &self.kind {
            Kind::Object(members) => Some(members),
            _ => None,
        }
    }
}

/// Parses `text` (JSON, or JSONC with `//` and `/* */` comments and
/// trailing commas). An empty text (only spaces and comments) is `None`.
///
/// # Errors
/// The text is not JSON or JSONC: the line and what is wrong.
pub fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut parser = Parser {
        text: text.as_bytes(),
        source: text,
        at: 0,
    };
    parser.skip()?;
    if parser.at == parser.text.len() {
        return Ok(None);
    }
    let node = parser.value(0)?;
    parser.skip()?;
    if parser.at != parser.text.len() {
        return Err(parser.error("more after the end of the value"));
    }
    Ok(Some(node))
}

/// The 1-based line of byte `at`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Parser<'a> {
    text: &'a [u8],
    source: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> SyntaxError {
        SyntaxError {
            line: line_of(self.source, self.at),
            message: message.to_owned(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    /// Skips white space and comments.
    fn skip(&mut self) -> Result<(), SyntaxError> {
        loop {
            match (self.peek(), self.text.get(self.at + 1)) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => self.at += 1,
                // A byte order mark at the very start.
                (Some(0xEF), _) if self.at == 0 && self.text.starts_with(b"\xEF\xBB\xBF") => {
                    self.at += 3;
                }
                (Some(b'/'), Some(b'/')) => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.at += 1;
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let start = self.at;
                    self.at += 2;
                    loop {
                        match self.peek() {
                            None => {
                                self.at = start;
                                return Err(self.error("a /* comment is never closed"));
                            }
                            Some(b'*') if self.text.get(self.at + 1) == Some(&b'/') => {
                                self.at += 2;
                                break;
                            }
                            Some(_) => self.at += 1,
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let start = self.at;
        let kind = match self.peek() {
            Some(b'{') => self.object(depth)?,
            Some(b'[') => self.array(depth)?,
            Some(b'"') => Kind::String(self.string()?),
            Some(b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                while matches!(
                    self.peek(),
                    Some(b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
                ) {
                    self.at += 1;
                }
                let word = &self.source[start..self.at];
                let number = word.parse::<f64>().is_ok() && !word.starts_with(['i', 'n', 'N', 'I']);
                if !(number || matches!(word, "true" | "false" | "null")) {
                    self.at = start;
                    return Err(self.error(&format!("`{word}` is not a JSON value")));
                }
                Kind::Other
            }
            None => return Err(self.error("the text ends where a value should be")),
            Some(_) => return Err(self.error("a value should start here")),
        };
        Ok(Node {
            span: start..self.at,
            kind,
        })
    }

    fn object(&mut self, depth: usize) -> Result<Kind, SyntaxError> {
        self.at += 1;
        let mut members = Vec::new();
        loop {
            self.skip()?;
            match self.peek() {
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Kind::Object(members));
                }
                Some(b'"') => {}
                _ => return Err(self.error("expected a \"key\" or `}`")),
            }
            let key_start = self.at;
            let key = self.string()?;
            let key_span = key_start..self.at;
            self.skip()?;
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:` after the key"));
            }
            self.at += 1;
            self.skip()?;
            let value = self.value(depth + 1)?;
            members.push(Member {
                key,
                key_span,
                value,
            });
            self.skip()?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return Err(self.error("expected `,` or `}`")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Kind, SyntaxError> {
        self.at += 1;
        let mut items = Vec::new();
        loop {
            self.skip()?;
            if self.peek() == Some(b']') {
                self.at += 1;
                return Ok(Kind::Array(items));
            }
            items.push(self.value(depth + 1)?);
            self.skip()?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {}
                _ => return Err(self.error("expected `,` or `]`")),
            }
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.peek() {
                None | Some(b'\n') => {
                    self.at = start;
                    return Err(self.error("a string is never closed"));
                }
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(b'\\') => self.at += 2,
                Some(_) => self.at += 1,
            }
        }
        let raw = &self.source[start..self.at.min(self.source.len())];
        serde_json::from_str::<String>(raw).map_err(|_| {
            self.at = start;
            self.error("a string with a bad escape or a control character")
        })
    }
}

/// The server entries of a JSON config under `container` (the keys down to
/// the object that holds them); `skip` names members that are themselves
/// containers (opencode's `mcp.servers`).
pub fn sites(
    text: &str,
    root: &Node,
    container: &[String],
    skip: &[&str],
) -> Vec<super::edit::Site> {
    let mut node = root;
    for key in container {
        match node.get(key) {
            Some(member) => node = &member.value,
            None => return Vec::new(),
        }
    }
    let Some(members) = node.as_object() else {
        return Vec::new();
    };
    // An entry is an object; a member named in `skip` is a container
    // unless it looks like an entry itself.
    let entry_like = |node: &Node| {
        ["command", "type", "url"]
            .iter()
            .any(|k| node.get(k).is_some())
    };
    members
        .iter()
        .filter(|m| m.value.as_object().is_some())
        .filter(|m| !skip.contains(&m.key.as_str()) || entry_like(&m.value))
        .map(|member| site(text, member, container))
        .collect()
}

fn site(text: &str, member: &Member, container: &[String]) -> super::edit::Site {
    use super::edit::{Field, Insert, List, Site, Value};
    let entry = &member.value;
    let field = |key: &str| {
        entry.get(key).map(|m| Field {
            span: m.value.span.clone(),
            value: match &m.value.kind {
                Kind::String(s) => Value::Str(s.clone()),
                Kind::Array(items) => Value::List(List::new(
                    text,
                    &m.value.span,
                    items
                        .iter()
                        .map(|n| (n.as_str().map(str::to_owned), n.span.clone()))
                        .collect(),
                )),
                _ => Value::Other,
            },
        })
    };
    let add_args = entry.get("command").map(|command| {
        let before_key = &text[..command.key_span.start];
        let indent = &before_key[before_key.trim_end().len()..];
        let colon = &text[command.key_span.end..command.value.span.start];
        Insert {
            at: command.value.span.end,
            before: format!(",{indent}\"args\"{colon}"),
            after: String::new(),
        }
    });
    let mut env = Vec::new();
    let mut secrets = Vec::new();
    for key in ["env", "environment", "headers"] {
        if let Some(members) = entry.get(key).and_then(|m| m.value.as_object()) {
            if key != "headers" {
                env.extend(members.iter().map(|m| m.key.clone()));
            }
            secrets.extend(members.iter().map(|m| m.value.span.clone()));
        }
    }
    Site {
        name: member.key.clone(),
        container: container.to_vec(),
        command: field("command"),
        args: field("args"),
        add_args,
        kind: entry
            .get("type")
            .and_then(|m| m.value.as_str())
            .map(str::to_owned),
        url: ["url", "httpUrl", "serverUrl"]
            .iter()
            .any(|k| entry.get(k).is_some()),
        env,
        cwd: entry
            .get("cwd")
            .and_then(|m| m.value.as_str())
            .map(str::to_owned),
        secrets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_comments_and_trailing_commas() {
        let text = "// top\n{ \"a\": [1, \"x\", ], /* c */ \"b\": {\"c\": null,}, }\n";
        let node = parse(text).expect("parses").expect("a value");
        let a = node.get("a").expect("a");
        assert_eq!(&text[a.value.span.clone()], "[1, \"x\", ]");
        assert_eq!(a.value.as_array().map(<[Node]>::len), Some(2));
        let b = node.get("b").expect("b");
        assert_eq!(&text[b.value.span.clone()], "{\"c\": null,}");
        assert_eq!(parse("  // only\n").expect("empty"), None);
    }

    #[test]
    fn errors_name_the_line() {
        let error = parse("{\n  \"a\": 1\n  \"b\": 2\n}").expect_err("missing comma");
        assert_eq!(error.line, 3, "{error:?}");
        assert!(parse("{\"a\": tru}").is_err());
        assert!(parse("[1] 2").is_err());
        assert!(parse("\"\\x\"").is_err());
        let deep = "[".repeat(10_000);
        assert!(
            parse(&deep).is_err(),
            "deep nesting is refused, not a crash"
        );
        assert!(parse("\"é\\u00e9\"").is_ok());
    }
}
