//! Text from outside corral (ledger records, process command lines), made
//! safe to print on a terminal.

use std::{borrow::Cow, fmt::Write};

/// `text` with every control character (C0, DEL, C1) and every bidirectional
/// override escaped as `\n`, `\t`, `\r` or `\u{..}`: a hostile record or
/// process name cannot clear the screen, move the cursor, reorder what is
/// shown, or print a line of its own. Plain text is returned as is.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
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
}
