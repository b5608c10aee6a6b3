//! Codex's `config.toml` read with `toml_edit`, which keeps the byte span
//! of every value: the guard's edits replace only those bytes, so comments
//! and layout stay.

use toml_edit::{Document, Item, TableLike};

use super::{
    edit::{Field, Insert, List, Site, Value},
    json::SyntaxError,
};

/// Parses `text` as TOML.
///
/// # Errors
/// Not TOML: the line and what is wrong.
pub fn parse(text: &str) -> Result<Document<&str>, SyntaxError> {
    Document::parse(text).map_err(|error| SyntaxError {
        line: error
            .span()
            .map_or(1, |span| super::json::line_of(text, span.start)),
        message: error.message().to_owned(),
    })
}

/// The server entries under `container` (Codex: `mcp_servers`).
pub fn sites(text: &str, doc: &Document<&str>, container: &[String]) -> Vec<Site> {
    let mut table: &dyn TableLike = doc.as_table();
    for key in container {
        match table.get(key).and_then(Item::as_table_like) {
            Some(inner) => table = inner,
            None => return Vec::new(),
        }
    }
    table
        .iter()
        .filter_map(|(name, item)| {
            let entry = item.as_table_like()?;
            let inline = item.as_inline_table().is_some() || item.is_value();
            Some(site(text, name, entry, inline, container))
        })
        .collect()
}

fn site(text: &str, name: &str, entry: &dyn TableLike, inline: bool, container: &[String]) -> Site {
    let field = |key: &str| -> Option<Field> {
        let value = entry.get(key)?.as_value()?;
        let span = value.span()?;
        let value = match value {
            toml_edit::Value::String(s) => Value::Str(s.value().clone()),
            toml_edit::Value::Array(array) => {
                let items = array
                    .iter()
                    .map(|v| Some((v.as_str().map(str::to_owned), v.span()?)))
                    .collect::<Option<Vec<_>>>()?;
                Value::List(List::new(text, &span, items))
            }
            _ => Value::Other,
        };
        Some(Field { span, value })
    };
    let command = field("command");
    let add_args = command.as_ref().and_then(|command| {
        if inline {
            return Some(Insert {
                at: command.span.end,
                before: String::from(", args = "),
                after: String::new(),
            });
        }
        // A line of its own after the `command` line, its key written as
        // `command`'s is (`command = ` or a dotted `name.command = `).
        let (key, _) = entry.get_key_value("command")?;
        let key_start = key.span()?.start;
        let line_start = text[..key_start].rfind('\n').map_or(0, |n| n + 1);
        let prefix = &text[line_start..key_start];
        let line_end = text[command.span.end..]
            .find('\n')
            .map_or(text.len(), |n| command.span.end + n);
        let (at, newline) = if line_end > 0 && text.as_bytes().get(line_end - 1) == Some(&b'\r') {
            (line_end - 1, "\r\n")
        } else {
            (line_end, "\n")
        };
        Some(Insert {
            at,
            before: format!("{newline}{prefix}args = "),
            after: String::new(),
        })
    });
    let mut env = Vec::new();
    let mut secrets = Vec::new();
    for key in ["env", "http_headers"] {
        if let Some(table) = entry.get(key).and_then(Item::as_table_like) {
            if key == "env" {
                env.extend(table.iter().map(|(k, _)| k.to_owned()));
            }
            secrets.extend(table.iter().filter_map(|(_, v)| v.span()));
        }
    }
    if let Some(names) = entry.get("env_vars").and_then(Item::as_array) {
        env.extend(names.iter().filter_map(|v| v.as_str().map(str::to_owned)));
    }
    Site {
        name: name.to_owned(),
        container: container.to_vec(),
        command,
        args: field("args"),
        add_args,
        kind: entry.get("type").and_then(Item::as_str).map(str::to_owned),
        url: entry.get("url").is_some(),
        env,
        cwd: entry.get("cwd").and_then(Item::as_str).map(str::to_owned),
        secrets,
    }
}
