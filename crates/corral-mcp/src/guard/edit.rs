//! Where an entry's `command` and `args` are in its file's text, and the
//! text edits that guard it and take the guard away. The same for JSON and
//! TOML: an edit replaces the bytes of one value or inserts text at one
//! place, so everything else in the file keeps its bytes.

use std::ops::Range;

/// One server entry as found in a file: its name and where its fields are.
#[derive(Debug, Clone, Default)]
pub struct Site {
    /// The entry's name (its key).
    pub name: String,
    /// The keys from the top of the file to the object that holds the
    /// entry, e.g. `["mcpServers"]` or `["projects", "/home/me/src", "mcpServers"]`.
    pub container: Vec<String>,
    /// `command`.
    pub command: Option<Field>,
    /// `args` (absent for opencode, whose `command` is the whole array).
    pub args: Option<Field>,
    /// Where and how an `args` array is added when there is none.
    pub add_args: Option<Insert>,
    /// `type`, when a string.
    pub kind: Option<String>,
    /// Whether a `url`, `httpUrl` or `serverUrl` is set.
    pub url: bool,
    /// The names (never the values) in `env`, `environment` and `env_vars`.
    pub env: Vec<String>,
    /// `cwd`, when set.
    pub cwd: Option<String>,
    /// The bytes of values never to print: those of `env`, `environment`
    /// and `headers`.
    pub secrets: Vec<Range<usize>>,
}

/// A field's value and its bytes.
#[derive(Debug, Clone)]
pub struct Field {
    /// The value's bytes.
    pub span: Range<usize>,
    /// The value.
    pub value: Value,
}

/// The values a guard reads.
#[derive(Debug, Clone)]
pub enum Value {
    /// A string.
    Str(String),
    /// An array; `None` for an element that is not a string.
    List(List),
    /// Anything else.
    Other,
}

/// An array: its elements and how they are laid out.
#[derive(Debug, Clone)]
pub struct List {
    /// The elements (`None`: not a string) and their bytes.
    pub items: Vec<(Option<String>, Range<usize>)>,
    /// The byte after `[`.
    pub open: usize,
    /// What separates elements after the comma (`" "`, or a newline and
    /// the indentation).
    pub sep: String,
}

/// Text to insert at one place.
#[derive(Debug, Clone)]
pub struct Insert {
    /// Where.
    pub at: usize,
    /// Before the new value (`, "args": `, or a newline and `args = `).
    pub before: String,
    /// After it.
    pub after: String,
}

/// A text edit: these bytes become that text.
pub type Edit = (Range<usize>, String);

impl List {
    /// The strings, when every element is one.
    pub fn strings(&self) -> Option<Vec<String>> {
        self.items.iter().map(|(s, _)| s.clone()).collect()
    }

    /// Reads an array's layout: `text` is the whole file, `span` the
    /// array's bytes.
    pub fn new(
        text: &str,
        span: &Range<usize>,
        items: Vec<(Option<String>, Range<usize>)>,
    ) -> Self {
        let sep = match items.as_slice() {
            [first, second, ..] => after_comma(&text[first.1.end..second.1.start]),
            [first] => {
                let lead = &text[span.start + 1..first.1.start];
                if lead.contains('\n') {
                    lead.to_owned()
                } else {
                    String::from(" ")
                }
            }
            [] => String::from(" "),
        };
        Self {
            items,
            open: span.start + 1,
            sep,
        }
    }

    /// The edit that puts `new` in front of the elements, laid out as
    /// they are.
    pub fn prepend(&self, new: &[String]) -> Edit {
        match self.items.first() {
            Some((_, first)) => {
                let text: String = new
                    .iter()
                    .map(|item| format!("{},{}", quote(item), self.sep))
                    .collect();
                (first.start..first.start, text)
            }
            None => {
                let text = new.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ");
                (self.open..self.open, text)
            }
        }
    }

    /// The edit that removes the first `count` elements (the inverse of
    /// [`List::prepend`]).
    pub fn drop_front(&self, count: usize) -> Option<Edit> {
        let first = self.items.first()?.1.start;
        let end = match self.items.get(count) {
            Some((_, next)) => next.start,
            None => self.items.get(count.checked_sub(1)?)?.1.end,
        };
        Some((first..end, String::new()))
    }
}

/// What follows the comma in the text between two elements, comments
/// dropped: the separator to copy.
fn after_comma(between: &str) -> String {
    let rest = between.split_once(',').map_or(between, |(_, rest)| rest);
    if rest.trim().is_empty() {
        rest.to_owned()
    } else {
        // A comment between elements: copy the white space only.
        let ws: String = rest.chars().take_while(|c| c.is_whitespace()).collect();
        if ws.is_empty() { String::from(" ") } else { ws }
    }
}

/// The edits that make `site` start `front` followed by what it started:
/// for a `command` string with `args`, `command` becomes `front[0]` and
/// `front[1..]` plus the old command go in front of `args` (added when
/// missing); for an opencode `command` array, `front` goes in front of it.
pub fn guard(site: &Site, front: &[String]) -> Option<Vec<Edit>> {
    let command = site.command.as_ref()?;
    match &command.value {
        Value::List(list) => Some(vec![list.prepend(front)]),
        Value::Str(old) => {
            let (program, rest) = front.split_first()?;
            let mut moved: Vec<String> = rest.to_vec();
            moved.push(old.clone());
            let mut edits = vec![(command.span.clone(), quote(program))];
            match &site.args {
                Some(Field {
                    value: Value::List(list),
                    ..
                }) => edits.push(list.prepend(&moved)),
                Some(_) => return None,
                None => {
                    let add = site.add_args.as_ref()?;
                    let list = moved
                        .iter()
                        .map(|s| quote(s))
                        .collect::<Vec<_>>()
                        .join(", ");
                    edits.push((
                        add.at..add.at,
                        format!("{}[{list}]{}", add.before, add.after),
                    ));
                }
            }
            Some(edits)
        }
        Value::Other => None,
    }
}

/// The edits that take a guard of `count` leading words away (`corral mcp
/// wrap ... --`): the inverse of [`guard`], rebuilt from the entry alone.
/// `inner` is what the guard started.
pub fn unguard(site: &Site, count: usize, inner: &[String]) -> Option<Vec<Edit>> {
    let command = site.command.as_ref()?;
    match &command.value {
        Value::List(list) => Some(vec![list.drop_front(count)?]),
        Value::Str(_) => {
            let program = inner.first()?;
            let Some(Field {
                value: Value::List(list),
                ..
            }) = &site.args
            else {
                return None;
            };
            // `args` holds the guard's words after the program and the
            // server's command: all but the first of `count`, plus one.
            Some(vec![
                (command.span.clone(), quote(program)),
                list.drop_front(count)?,
            ])
        }
        Value::Other => None,
    }
}

/// The bytes of `site` that a guard changes: from the first to the last
/// byte of `command` and `args` (or where `args` would be added).
pub fn region(site: &Site) -> Option<Range<usize>> {
    let command = &site.command.as_ref()?.span;
    let (start, end) = match (&site.args, &site.add_args) {
        (Some(args), _) => (
            command.start.min(args.span.start),
            command.end.max(args.span.end),
        ),
        (None, Some(add)) if matches!(site.command.as_ref()?.value, Value::Str(_)) => {
            (command.start.min(add.at), command.end.max(add.at))
        }
        _ => (command.start, command.end),
    };
    Some(start..end)
}

/// Applies `edits` (non-overlapping) to `text`.
pub fn apply(text: &str, edits: &[Edit]) -> String {
    let mut edits = edits.to_vec();
    edits.sort_by_key(|(span, _)| std::cmp::Reverse(span.start));
    let mut out = text.to_owned();
    for (span, with) in edits {
        out.replace_range(span, &with);
    }
    out
}

/// `value` as a string literal, the same in JSON and in TOML (a TOML basic
/// string takes JSON's escapes).
fn quote(value: &str) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| String::from("\"\""))
}
