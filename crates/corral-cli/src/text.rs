//! Text from outside corral (ledger records, process command lines, what an
//! MCP server says), made safe to print on a terminal.

use std::{borrow::Cow, fmt::Write};

/// `text` with every control character (C0, DEL, C1) and every bidirectional
/// override escaped as `\n`, `\t`, `\r` or `\u{..}`: a hostile record or
/// process name cannot clear the screen, move the cursor, reorder what is
/// shown, or print a line of its own. Plain text is returned as is.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// As [`printable`], but newlines and tabs are kept: for text that is meant
/// to be several lines (a tool's answer). `ESC`, `\r` and every other
/// control character are still escaped.
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// Pretty-printed JSON from `serde_json` with the characters it leaves raw
/// in strings escaped too: DEL, C1 and the bidirectional overrides become
/// `\uXXXX` (C0 is escaped by `serde_json` already; outside strings there
/// is only ASCII). The result is the same JSON value.
pub fn printable_json(json: &str) -> Cow<'_, str> {
    let raw = |c: char| c > '\u{1f}' && needs_escape(c);
    if !json.chars().any(raw) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if raw(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape(text: &str, lines: bool) -> Cow<'_, str> {
    let kept = |c: char| lines && matches!(c, '\n' | '\t');
    if !text.chars().any(|c| needs_escape(c) && !kept(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if kept(c) => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(printable("sleep 10"), Cow::Borrowed("sleep 10")));
        assert_eq!(printable("a\x1b[2J\nb"), "a\\u{1b}[2J\\nb");
        assert_eq!(printable("\r\t\x7f\u{9b}"), "\\r\\t\\u{7f}\\u{9b}");
        assert_eq!(printable("x\u{202e}y"), "x\\u{202e}y");
        assert_eq!(printable("héllo → wörld"), "héllo → wörld");
    }

    #[test]
    fn lines_keep_newlines_and_tabs_only() {
        assert!(matches!(printable_lines("a\n\tb"), Cow::Borrowed("a\n\tb")));
        assert_eq!(
            printable_lines("a\x1b]0;title\x07\nb\r\u{9b}2K"),
            "a\\u{1b}]0;title\\u{7}\nb\\r\\u{9b}2K"
        );
    }

    #[test]
    fn json_keeps_its_value_with_del_c1_and_overrides_escaped() {
        let value = serde_json::json!({"t": "a\u{1b}b\u{7f}c\u{9b}d\u{202e}e\nf"});
        let json = serde_json::to_string_pretty(&value).expect("serializes");
        let escaped = printable_json(&json);
        assert!(!escaped.chars().any(needs_escape_raw), "{escaped}");
        let back: serde_json::Value = serde_json::from_str(&escaped).expect("still JSON");
        assert_eq!(back, value);
    }

    fn needs_escape_raw(c: char) -> bool {
        c != '\n' && needs_escape(c)
    }
}
