//! Operator-defined command tools (`corral mcp serve --tools FILE`): each a
//! fixed command the operator chose, whose typed arguments fill
//! placeholders inside its `argv` elements. No shell is involved: a value
//! is always inside the one argv element that holds its placeholder, so no
//! value can add, split or quote an argument, however it is spelled.
//!
//! The file (docs/mcp.md, "Tools files"):
//!
//! ```json
//! {"version": 1, "tools": [{
//!   "name": "greet",
//!   "description": "Say hello to someone.",
//!   "arguments": {"name": {"type": "string", "description": "who"}},
//!   "required": ["name"],
//!   "argv": ["printf", "Hello, %s!", "{name}"],
//!   "timeout": "10s",
//!   "task_support": "forbidden"
//! }]}
//! ```
//!
//! Everything is checked once, at load: unknown keys, names (the MCP
//! tool-name rules), types, defaults, placeholders that name no argument,
//! arguments no placeholder uses, a placeholder in the program itself. A
//! call is then checked against the tool's arguments (unknown, missing,
//! mistyped: refused naming the field) and runs as a `run` of the server.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Read as _,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{ServeError, ServeOptions, request::FieldError, roots::Roots};

/// The largest tools file read.
const MAX_FILE: u64 = 1 << 20;

/// The names of the server's generic tools: a command tool may not take
/// one unless the server offers only command tools (`--tools-only`).
pub(crate) const GENERIC: &[&str] = &["run", "list_runs", "read_run", "wait_run", "kill_run"];

/// The command tools of a `--tools` file, checked. Empty by default.
///
/// ```
/// use std::path::Path;
///
/// use corral_mcp::serve::CommandTools;
///
/// let text = r#"{"tools": [{"name": "greet", "description": "Say hello.",
///     "arguments": {"name": {"type": "string"}}, "required": ["name"],
///     "argv": ["printf", "Hello, %s!", "{name}"]}]}"#;
/// let tools = CommandTools::parse(text, Path::new("tools.json"))?;
/// assert_eq!(tools.names(), ["greet"]);
/// assert!(!tools.is_empty() && CommandTools::default().is_empty());
///
/// // A placeholder that names no argument is refused at load.
/// let broken = text.replace("{name}\"]", "{nmae}\"]");
/// let error = CommandTools::parse(&broken, Path::new("tools.json")).unwrap_err();
/// assert!(error.to_string().contains("nmae"), "{error}");
/// # Ok::<(), corral_mcp::serve::ServeError>(())
/// ```
///
/// A server offering only the tools of a file:
///
/// ```no_run
/// use std::path::Path;
///
/// use corral_mcp::serve::{CommandTools, Runner, ServeOptions};
///
/// # fn main() -> Result<(), corral_mcp::serve::ServeError> {
/// let mut options = ServeOptions::default();
/// options.tools = CommandTools::load(Path::new("/etc/corral/tools.json"))?;
/// options.tools_only = true;
/// let _runner = Runner::new(options)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CommandTools {
    tools: Vec<CommandTool>,
    /// The file they came from (for errors found later, at start).
    path: PathBuf,
}

/// Whether a tool's call may be answered with an MCP task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TaskSupport {
    /// Never: the call is answered when the command is done.
    Forbidden,
    /// When the request declared the Tasks extension and the command is not
    /// done within the task window.
    Optional,
    /// Always, at once; a request without the Tasks extension is refused
    /// (`-32021`).
    Required,
}

/// One checked tool.
#[derive(Debug, Clone)]
pub(crate) struct CommandTool {
    pub name: String,
    pub title: Option<String>,
    pub description: String,
    arguments: BTreeMap<String, Argument>,
    required: Vec<String>,
    /// Each argv element, as pieces; the program (the first) has no
    /// placeholder.
    argv: Vec<Vec<Piece>>,
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub task_support: TaskSupport,
    /// The tool's own task window (else the server's).
    pub task_window: Option<Duration>,
}

#[derive(Debug, Clone)]
struct Argument {
    kind: Kind,
    description: Option<String>,
    default: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    String,
    Integer,
    Number,
    Boolean,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::Boolean => "boolean",
        }
    }

    /// The name with its article, for an error: "an integer".
    fn with_article(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Integer => "an integer",
            Kind::Number => "a number",
            Kind::Boolean => "a boolean",
        }
    }

    /// `value` as it goes into an argv element, if it is of this kind.
    fn text(self, value: &Value) -> Option<String> {
        match (self, value) {
            (Kind::String, Value::String(text)) => Some(text.clone()),
            (Kind::Integer, Value::Number(n)) if n.is_i64() || n.is_u64() => Some(n.to_string()),
            (Kind::Number, Value::Number(n)) => Some(n.to_string()),
            (Kind::Boolean, Value::Bool(b)) => Some(b.to_string()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Arg(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    version: Option<u64>,
    tools: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolSpec {
    name: String,
    #[serde(default)]
    title: Option<String>,
    description: String,
    #[serde(default)]
    arguments: BTreeMap<String, ArgumentSpec>,
    #[serde(default)]
    required: Vec<String>,
    argv: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    timeout: Option<Value>,
    #[serde(default)]
    task_support: Option<TaskSupport>,
    #[serde(default)]
    task_window: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgumentSpec {
    #[serde(rename = "type")]
    kind: Kind,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    default: Option<Value>,
}

impl CommandTools {
    /// Reads and checks the tools file `path`. It is code the server runs:
    /// it must be a regular file with one name, owned by the server's user
    /// or root and writable by nobody else, in directories only that user
    /// or root can change (as `--token-file`, except that others may read
    /// it).
    ///
    /// # Errors
    /// [`ServeError::Tools`]: the file fails the ownership rule (the text
    /// names the fix), cannot be read, is not valid JSON (line and column),
    /// or breaks a rule (the tool and the rule).
    pub fn load(path: &Path) -> Result<Self, ServeError> {
        let refuse = |why: String| ServeError::Tools {
            path: path.to_owned(),
            why,
        };
        let file = crate::private_file::open_unwritable(path).map_err(|e| refuse(e.to_string()))?;
        let mut text = String::new();
        file.take(MAX_FILE + 1)
            .read_to_string(&mut text)
            .map_err(|e| refuse(format!("cannot read it: {e}")))?;
        if text.len() as u64 > MAX_FILE {
            return Err(refuse("larger than 1 MiB: not a tools file".into()));
        }
        Self::parse(&text, path)
    }

    /// Checks the text of a tools file (`path` only names it in errors).
    ///
    /// # Errors
    /// As [`CommandTools::load`], the file's ownership aside.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ServeError> {
        let refuse = |why: String| ServeError::Tools {
            path: path.to_owned(),
            why,
        };
        let file: FileSpec = serde_json::from_str(text).map_err(|e| {
            refuse(format!(
                "{e}; a tools file is {{\"version\": 1, \"tools\": [{{\"name\": ..., \
                 \"description\": ..., \"argv\": [...]}}]}}"
            ))
        })?;
        if let Some(version) = file.version.filter(|v| *v != 1) {
            return Err(refuse(format!(
                "version {version}: this corral reads version 1; write \"version\": 1"
            )));
        }
        let mut tools: Vec<CommandTool> = Vec::new();
        for (index, value) in file.tools.into_iter().enumerate() {
            let named = value.get("name").and_then(Value::as_str).map_or_else(
                || format!("tools[{index}]"),
                |n| format!("tools[{index}] ({n:?})"),
            );
            let tool = check_tool(value).map_err(|why| refuse(format!("{named}: {why}")))?;
            if tools.iter().any(|other| other.name == tool.name) {
                return Err(refuse(format!(
                    "{named}: a second tool named {:?}; tool names must be unique",
                    tool.name
                )));
            }
            tools.push(tool);
        }
        if tools.is_empty() {
            return Err(refuse("no tools: add one to \"tools\"".into()));
        }
        Ok(Self {
            tools,
            path: path.to_owned(),
        })
    }

    /// The tools' names, in the file's order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|tool| tool.name.as_str()).collect()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&CommandTool> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &CommandTool> {
        self.tools.iter()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Checks `options.tools` against the rest of `options` (at start, before
/// serving): names of the generic tools taken only under `tools_only`, a
/// timeout within the maximum, a `cwd` inside the roots, a required task
/// only where tasks are on.
pub(crate) fn check_options(options: &ServeOptions, roots: &Roots) -> Result<(), ServeError> {
    let tools = &options.tools;
    let refuse = |tool: &CommandTool, why: String| ServeError::Tools {
        path: tools.path().to_owned(),
        why: format!("{:?}: {why}", tool.name),
    };
    if options.tools_only && tools.is_empty() {
        return Err(ServeError::Tools {
            path: PathBuf::from("(none)"),
            why: "--tools-only offers only the tools of a --tools file, and none was given; \
                  add --tools FILE"
                .into(),
        });
    }
    for tool in tools.iter() {
        if !options.tools_only && GENERIC.contains(&tool.name.as_str()) {
            return Err(refuse(
                tool,
                format!(
                    "the name of a generic tool of this server ({}); rename it, or serve \
                     with --tools-only",
                    GENERIC.join(", ")
                ),
            ));
        }
        if let Some(timeout) = tool.timeout
            && timeout > options.max_timeout
        {
            return Err(refuse(
                tool,
                format!(
                    "timeout {} s is above this server's maximum of {} s (--max-timeout)",
                    timeout.as_secs_f64(),
                    options.max_timeout.as_secs_f64()
                ),
            ));
        }
        if let Some(cwd) = &tool.cwd {
            roots
                .resolve(Some(cwd))
                .map_err(|error| refuse(tool, format!("cwd {cwd:?}: {}", error.rule)))?;
        }
        check_program(tool).map_err(|why| refuse(tool, why))?;
        if tool.task_support == TaskSupport::Required && options.task_window.is_none() {
            return Err(refuse(
                tool,
                "task_support \"required\", and this server answers with no tasks \
                 (--no-tasks); drop --no-tasks, or make it \"optional\""
                    .into(),
            ));
        }
    }
    Ok(())
}

/// Checks the program `tool` runs as the tools file itself is checked
/// (`private_file::check_program`): otherwise another user who can change
/// the program, or a directory on its way, chooses what the server runs,
/// often as root. A name with a slash must be absolute (a relative one is
/// found from the run's directory); a bare name is looked for along the
/// `PATH` the run will search (the tool's `env`, else the server's), and
/// every entry is checked, with the file of that name in it if there is
/// one: which one runs depends on the run's user (`--user`) and the
/// execute bits, so each could be the one. A program found nowhere passes
/// where nobody else can put it later. A script's `#!` interpreter is
/// checked the same way, and the program a `#!/usr/bin/env NAME` line
/// looks up along that `PATH`.
fn check_program(tool: &CommandTool) -> Result<(), String> {
    let program = match tool.argv.first().map(Vec::as_slice) {
        Some([Piece::Text(program)]) if !program.is_empty() => program.clone(),
        _ => return Err("argv[0] is empty; name the program".into()),
    };
    let search = tool
        .env
        .iter()
        .find(|(key, _)| key == "PATH")
        .map(|(_, value)| std::ffi::OsString::from(value))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut looking_for = Some(program.clone());
    // A program, then what an `env` script of it looks up, and so on.
    for _ in 0..4 {
        let Some(name) = looking_for.take() else {
            return Ok(());
        };
        looking_for =
            check_one(&name, &search).map_err(|why| format!("argv[0] {program:?}: {why}"))?;
    }
    Err(format!(
        "argv[0] {program:?}: more than 4 #!/usr/bin/env programs deep"
    ))
}

/// One program `name` along `search` (see [`check_program`]): what a
/// `#!/usr/bin/env NAME` script of it looks up next, if it is one.
fn check_one(name: &str, search: &std::ffi::OsStr) -> Result<Option<String>, String> {
    use std::os::unix::ffi::OsStrExt as _;
    if name.contains('/') {
        if !name.starts_with('/') {
            return Err(format!(
                "{name:?} is a relative path, found from the run's directory, which callers \
                 choose and other users may change; give the program's absolute path"
            ));
        }
        return crate::private_file::check_program(Path::new(name)).map_err(|e| e.to_string());
    }
    let mut found = None;
    for dir in search.as_bytes().split(|&b| b == b':') {
        let dir = Path::new(std::ffi::OsStr::from_bytes(dir));
        if !dir.is_absolute() {
            return Err(format!(
                "{name:?} is looked for along PATH, whose entry {:?} is relative (found from \
                 the run's directory, which callers choose); give the program's absolute \
                 path, or an absolute PATH in the tool's \"env\"",
                dir.display()
            ));
        }
        let next = crate::private_file::check_program(&dir.join(name)).map_err(|error| {
            format!(
                "{name:?} is looked for along PATH ({}), through {}: {error}; give the \
                 program's absolute path, or a PATH of safe directories in the tool's \"env\"",
                search.to_string_lossy(),
                dir.display()
            )
        })?;
        found = found.or(next);
    }
    Ok(found)
}

fn check_tool(value: Value) -> Result<CommandTool, String> {
    let spec: ToolSpec = serde_json::from_value(value).map_err(|e| e.to_string())?;
    check_name(&spec.name)?;
    let mut arguments = BTreeMap::new();
    for (name, argument) in spec.arguments {
        if !is_identifier(&name) {
            return Err(format!(
                "argument {name:?}: an argument's name is letters, digits and _ (not first a \
                 digit), at most 64"
            ));
        }
        if let Some(default) = &argument.default {
            match argument.kind.text(default) {
                None => {
                    return Err(format!(
                        "argument {name:?}: its default {default} is not {}",
                        argument.kind.with_article()
                    ));
                }
                Some(text) if text.contains('\0') => {
                    return Err(format!(
                        "argument {name:?}: its default holds a NUL character, which no argv \
                         element can"
                    ));
                }
                Some(_) => {}
            }
        }
        arguments.insert(
            name,
            Argument {
                kind: argument.kind,
                description: argument.description,
                default: argument.default,
            },
        );
    }
    for name in &spec.required {
        match arguments.get(name) {
            None => {
                return Err(format!(
                    "\"required\" names {name:?}, which is not in \"arguments\""
                ));
            }
            Some(argument) if argument.default.is_some() => {
                return Err(format!(
                    "argument {name:?} is required and has a default; drop one of the two"
                ));
            }
            Some(_) => {}
        }
    }
    if spec.argv.is_empty() {
        return Err("\"argv\" is empty; give the program and its arguments".into());
    }
    let mut argv = Vec::new();
    let mut used = BTreeSet::new();
    for (index, element) in spec.argv.iter().enumerate() {
        let pieces =
            template(element).map_err(|why| format!("argv[{index}] {element:?}: {why}"))?;
        for piece in &pieces {
            if let Piece::Arg(name) = piece {
                if index == 0 {
                    return Err(format!(
                        "argv[0] {element:?}: the program is fixed; it cannot hold a placeholder"
                    ));
                }
                if !arguments.contains_key(name) {
                    return Err(format!(
                        "argv[{index}] {element:?}: the placeholder {{{name}}} names no \
                         argument; add it to \"arguments\", or write {{{{ for a literal {{"
                    ));
                }
                used.insert(name.clone());
            }
        }
        let names: BTreeSet<&String> = pieces
            .iter()
            .filter_map(|piece| match piece {
                Piece::Arg(name) => Some(name),
                Piece::Text(_) => None,
            })
            .collect();
        let may_be_absent = |name: &String| {
            !spec.required.contains(name)
                && arguments.get(name).is_some_and(|a| a.default.is_none())
        };
        if names.len() > 1
            && let Some(absent) = names.iter().find(|name| may_be_absent(name))
        {
            return Err(format!(
                "argv[{index}] {element:?}: {{{absent}}} may be left out (not required, no \
                 default), which leaves out the whole element with the other values in it; \
                 put each in an element of its own, make it required, or give it a default"
            ));
        }
        // Left out after an option that may take the next element as its
        // value (`-o {out}`), it shifts the next value into that option's.
        if let Some(absent) = names.iter().find(|name| may_be_absent(name))
            && let Some([Piece::Text(option)]) = argv.last().map(Vec::as_slice)
            && option.starts_with('-')
            && option != "--"
            && !option.contains('=')
        {
            return Err(format!(
                "argv[{index}] {element:?}: {{{absent}}} may be left out (not required, no \
                 default) right after the option {option:?}, which would then take the next \
                 element as its value; make it required, give it a default, or attach it to the \
                 option (\"{option}{{{absent}}}\" or \"--option={{{absent}}}\")"
            ));
        }
        argv.push(pieces);
    }
    if let Some(unused) = arguments.keys().find(|name| !used.contains(*name)) {
        return Err(format!(
            "argument {unused:?} is used by no argv element; add {{{unused}}} to one, or drop it"
        ));
    }
    let duration = |field: &str, value: Option<Value>| {
        value
            .map(|value| super::request::duration(field, &value))
            .transpose()
            .map_err(|e| e.to_string())
    };
    let timeout = duration("timeout", spec.timeout)?;
    let task_window = duration("task_window", spec.task_window)?;
    let task_support = spec.task_support.unwrap_or(TaskSupport::Forbidden);
    if task_window.is_some() && task_support != TaskSupport::Optional {
        return Err(
            "\"task_window\" is for a tool whose task_support is \"optional\" (a required one \
             is a task at once, a forbidden one never)"
                .into(),
        );
    }
    for (key, value) in &spec.env {
        if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
            return Err(format!(
                "env {key:?}: a name is not empty and holds no = or NUL; a value holds no NUL"
            ));
        }
    }
    Ok(CommandTool {
        name: spec.name,
        title: spec.title,
        description: spec.description,
        arguments,
        required: spec.required,
        argv,
        cwd: spec.cwd,
        env: spec.env.into_iter().collect(),
        timeout,
        task_support,
        task_window,
    })
}

/// The MCP tool-name rules: 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.len() > 128 || !name.chars().all(allowed) {
        return Err(format!(
            "the name {name:?} breaks the MCP tool-name rules: 1 to 128 of A-Z a-z 0-9 _ - ."
        ));
    }
    Ok(())
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// An argv element as text and placeholders: `{name}` a placeholder, `{{`
/// and `}}` a literal brace.
fn template(element: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = element.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => name.push(c),
                        None => {
                            return Err("a { with no }; write {{ for a literal {".into());
                        }
                    }
                }
                if !is_identifier(&name) {
                    return Err(format!(
                        "{{{name}}} is not a placeholder (an argument's name in braces); write \
                         {{{{ and }}}} for literal braces"
                    ));
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Arg(name));
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err("a } with no {; write }} for a literal }".into()),
            c => text.push(c),
        }
    }
    if !text.is_empty() || pieces.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

impl CommandTool {
    /// The tool's input schema.
    pub(crate) fn schema(&self) -> Map<String, Value> {
        let properties: Map<String, Value> = self
            .arguments
            .iter()
            .map(|(name, argument)| {
                let mut property = json!({"type": argument.kind.name()});
                if let Some(description) = &argument.description {
                    property["description"] = json!(description);
                }
                if let Some(default) = &argument.default {
                    property["default"] = default.clone();
                }
                (name.clone(), property)
            })
            .collect();
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(properties));
        schema.insert("additionalProperties".into(), json!(false));
        if !self.required.is_empty() {
            schema.insert("required".into(), json!(self.required));
        }
        schema
    }

    /// The argv of a call with `arguments`: each placeholder replaced by its
    /// argument's value (or default) inside its own element; an element
    /// holding a placeholder of an optional argument that was not given and
    /// has no default is left out. `null` counts as not given.
    ///
    /// # Errors
    /// An unknown argument, a missing required one, a value of the wrong
    /// type or holding NUL: the field and the rule.
    pub(crate) fn argv(&self, arguments: &Map<String, Value>) -> Result<Vec<String>, FieldError> {
        let known = || {
            let names: Vec<&str> = self.arguments.keys().map(String::as_str).collect();
            if names.is_empty() {
                format!("{} takes no arguments", self.name)
            } else {
                format!("the arguments of {} are {}", self.name, names.join(", "))
            }
        };
        if let Some(unknown) = arguments.keys().find(|k| !self.arguments.contains_key(*k)) {
            return Err(FieldError {
                field: unknown.clone(),
                rule: format!("no such argument; {}", known()),
            });
        }
        let mut values = BTreeMap::new();
        // The arguments the caller gave (a default is the operator's).
        let mut given_by_caller = BTreeSet::new();
        for (name, argument) in &self.arguments {
            let given = arguments.get(name).filter(|v| !v.is_null());
            if given.is_some() {
                given_by_caller.insert(name.as_str());
            }
            let Some(value) = given.or(argument.default.as_ref()) else {
                if self.required.contains(name) {
                    return Err(FieldError {
                        field: name.clone(),
                        rule: format!("is required: give {}", argument.kind.with_article()),
                    });
                }
                continue;
            };
            let text = argument.kind.text(value).ok_or_else(|| FieldError {
                field: name.clone(),
                rule: format!("must be {}, not {value}", argument.kind.with_article()),
            })?;
            if text.contains('\0') {
                return Err(FieldError {
                    field: name.clone(),
                    rule: "must not hold a NUL character (no argv element can)".into(),
                });
            }
            values.insert(name.as_str(), text);
        }
        let mut argv = Vec::with_capacity(self.argv.len());
        // Whether a literal `--` ended the program's options: only one
        // that follows every element before it (with one left out, the
        // `--` may be read as the value of an option: `sort -o -- X`),
        // and only up to the next fixed element (which may be another
        // program's name: `env -- sort {file}`).
        let mut options_ended = false;
        let mut left_out = false;
        'elements: for pieces in &self.argv {
            let mut element = String::new();
            // The first argument the caller gave that comes before the
            // element has a character: it chose how the element begins,
            // with its value or, empty, by handing the start to what comes
            // after it (`{name}-{ver}` with `name` empty begins with `-`).
            let mut leading: Option<&String> = None;
            for piece in pieces {
                let started = !element.is_empty();
                match piece {
                    Piece::Text(text) => element.push_str(text),
                    Piece::Arg(name) => match values.get(name.as_str()) {
                        Some(value) => {
                            element.push_str(value);
                            if !started
                                && leading.is_none()
                                && given_by_caller.contains(name.as_str())
                            {
                                leading = Some(name);
                            }
                            // An empty value may leave an option without
                            // its value (`-o{out}`), which then takes the
                            // next element: a later `--` is not surely one.
                            if value.is_empty() {
                                left_out = true;
                            }
                        }
                        None => {
                            left_out = true;
                            continue 'elements;
                        }
                    },
                }
            }
            if let [Piece::Text(text)] = pieces.as_slice() {
                options_ended = text == "--" && !left_out;
            }
            // `-o{out}` with `out` empty is `-o` alone, which takes the
            // next element as its value.
            if let Some(Piece::Text(option)) = pieces.first()
                && option.starts_with('-')
                && !option.contains('=')
                && element == *option
                && let Some(Piece::Arg(name)) = pieces
                    .iter()
                    .find(|piece| matches!(piece, Piece::Arg(name) if given_by_caller.contains(name.as_str())))
            {
                return Err(FieldError {
                    field: name.clone(),
                    rule: format!(
                        "must not be empty here: {option:?} alone would take the next argument \
                         as its value"
                    ),
                });
            }
            if let Some(name) = leading {
                leading_rule(&element, options_ended, argv.first()).map_err(|rule| FieldError {
                    field: name.clone(),
                    rule,
                })?;
            }
            argv.push(element);
        }
        Ok(argv)
    }
}

/// Why `element`, which begins with a value the caller gave, may not go
/// into the argv, if it may not: a value that reads as an option
/// (`--output=/etc/passwd` for a `{rev}`) would let the caller choose the
/// program's options, not only its operands, unless the options have
/// ended; one that begins with `@` is a response file to gcc, clang,
/// rustc and javac (`@/root/secret` read as arguments, its text echoed in
/// the error), wherever it stands.
fn leading_rule(
    element: &str,
    options_ended: bool,
    program: Option<&String>,
) -> Result<(), String> {
    let program = program.map_or("the program", String::as_str);
    if element.starts_with('-') && !options_ended {
        return Err(format!(
            "must not begin with '-' here: {program} would read {element:?} as an option \
             (the tools file can put \"--\" in argv right before this element, so that the \
             program reads no options there)"
        ));
    }
    if element.starts_with('@') {
        return Err(format!(
            "must not begin with '@': {program} may read {element:?} as a file of arguments \
             (a response file); the tools file can put fixed text before the value"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
