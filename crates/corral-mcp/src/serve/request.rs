//! A tool call's arguments, checked field by field.
//!
//! Every refusal is a [`FieldError`] naming the field and the rule it broke,
//! with the fix: the calling agent reads it and tries again. A field given
//! as `null` counts as absent (clients send `null` for "not set").

use std::{fmt, time::Duration};

use serde_json::{Map, Value};

/// A field of a tool call that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field, as the caller spelled it (`env.NAME`, `argv[2]` inside).
    pub field: String,
    /// The rule, with the fix.
    pub rule: String,
}

impl FieldError {
    fn new(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.rule)
    }
}

impl std::error::Error for FieldError {}

/// What a run executes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A program and its arguments, without a shell.
    Argv(Vec<String>),
    /// A command line for `sh -c`.
    Shell(String),
}

/// The arguments of the `run` tool.
#[derive(Debug, Clone, PartialEq)]
pub struct RunArgs {
    /// What to run.
    pub program: Program,
    /// The working directory as given (checked against the roots later).
    pub cwd: Option<String>,
    /// Variables to set, in the order given.
    pub env: Vec<(String, String)>,
    /// Written to the command's standard input, which is then closed.
    pub stdin: String,
    /// How long the run may take.
    pub timeout: Option<Duration>,
    /// How long to wait after `SIGTERM` before `SIGKILL`.
    pub kill_after: Option<Duration>,
    /// Answer at once with a run id instead of waiting for the end.
    pub background: bool,
}

const RUN_FIELDS: &[&str] = &[
    "argv",
    "shell",
    "cwd",
    "env",
    "stdin",
    "timeout",
    "kill_after",
    "background",
];

/// Checks the arguments of `run`.
///
/// # Errors
/// The first field that breaks a rule.
pub fn run_args(args: &Map<String, Value>) -> Result<RunArgs, FieldError> {
    known_fields(args, RUN_FIELDS)?;
    let program = match (given(args, "argv"), given(args, "shell")) {
        (Some(_), Some(_)) => {
            return Err(FieldError::new(
                "argv",
                "give either `argv` or `shell`, not both: `argv` runs a program \
                 without a shell, `shell` runs a command line with `sh -c`",
            ));
        }
        (None, None) => {
            return Err(FieldError::new(
                "argv",
                "give either `argv` (an array of strings: the program and its \
                 arguments, e.g. [\"ls\", \"-l\"]) or `shell` (a command line for \
                 `sh -c`, e.g. \"ls -l | head\")",
            ));
        }
        (Some(argv), None) => Program::Argv(argv_field(argv)?),
        (None, Some(shell)) => {
            let shell = string(
                "shell",
                shell,
                "must be a string: a command line for `sh -c`",
            )?;
            if shell.is_empty() {
                return Err(FieldError::new(
                    "shell",
                    "must not be empty: give a command line for `sh -c`",
                ));
            }
            no_nul("shell", shell)?;
            Program::Shell(shell.to_owned())
        }
    };
    let cwd = match given(args, "cwd") {
        None => None,
        Some(value) => {
            let cwd = string(
                "cwd",
                value,
                "must be a string: a directory path, relative to the first root or absolute",
            )?;
            no_nul("cwd", cwd)?;
            Some(cwd.to_owned())
        }
    };
    let env = match given(args, "env") {
        None => Vec::new(),
        Some(value) => env_field(value)?,
    };
    let stdin = match given(args, "stdin") {
        None => String::new(),
        Some(value) => string(
            "stdin",
            value,
            "must be a string: the text written to the command's standard input",
        )?
        .to_owned(),
    };
    let timeout = given(args, "timeout")
        .map(|value| duration("timeout", value))
        .transpose()?;
    let kill_after = given(args, "kill_after")
        .map(|value| duration("kill_after", value))
        .transpose()?;
    let background = match given(args, "background") {
        None => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            return Err(FieldError::new(
                "background",
                "must be a boolean: true or false (not a string)",
            ));
        }
    };
    Ok(RunArgs {
        program,
        cwd,
        env,
        stdin,
        timeout,
        kill_after,
        background,
    })
}

fn argv_field(value: &Value) -> Result<Vec<String>, FieldError> {
    const SHAPE: &str = "must be a non-empty array of strings: the program and its \
                         arguments, e.g. [\"cargo\", \"test\"]";
    let Value::Array(items) = value else {
        return Err(FieldError::new("argv", SHAPE));
    };
    if items.is_empty() {
        return Err(FieldError::new("argv", SHAPE));
    }
    let mut argv = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let field = format!("argv[{index}]");
        let Value::String(arg) = item else {
            return Err(FieldError::new(
                field,
                "must be a string: write numbers and flags as strings, e.g. \"10\"",
            ));
        };
        if index == 0 && arg.is_empty() {
            return Err(FieldError::new(
                field,
                "must not be empty: it names the program to run",
            ));
        }
        no_nul(&field, arg)?;
        argv.push(arg.clone());
    }
    Ok(argv)
}

fn env_field(value: &Value) -> Result<Vec<(String, String)>, FieldError> {
    let Value::Object(vars) = value else {
        return Err(FieldError::new(
            "env",
            "must be an object of string values, e.g. {\"RUST_LOG\": \"debug\"}",
        ));
    };
    let mut env = Vec::with_capacity(vars.len());
    for (name, value) in vars {
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(FieldError::new(
                "env",
                format!(
                    "variable name {name:?} is not allowed: a name must be non-empty \
                     and contain neither `=` nor NUL"
                ),
            ));
        }
        let field = format!("env.{name}");
        let Value::String(text) = value else {
            return Err(FieldError::new(
                field,
                "must be a string: write numbers and booleans as strings, e.g. \"1\"",
            ));
        };
        no_nul(&field, text)?;
        env.push((name.clone(), text.clone()));
    }
    Ok(env)
}

/// The largest number of seconds accepted as a number.
const MAX_DURATION_SECS: f64 = 1e9;

const DURATION_FORMS: &str = "give a number of seconds (e.g. 30 or 1.5) or a duration \
                              string (e.g. \"1.5s\", \"2m\", \"500ms\", \"1m30s\")";

/// Checks a duration: a number of seconds (finite, at least 0, at most
/// 1e9) or a string as [`corral::duration::parse`] reads it (`"1.5s"`,
/// `"2m"`, `"500ms"`, `"10"`).
///
/// # Errors
/// Anything else, with both forms in the rule.
pub fn duration(field: &str, value: &Value) -> Result<Duration, FieldError> {
    match value {
        Value::Number(number) => {
            let secs = number.as_f64().unwrap_or(f64::NAN);
            if !secs.is_finite() || secs < 0.0 {
                return Err(FieldError::new(
                    field,
                    format!("must not be negative: {DURATION_FORMS}"),
                ));
            }
            if secs > MAX_DURATION_SECS {
                return Err(FieldError::new(
                    field,
                    format!("is too large: the most is 1e9 seconds; {DURATION_FORMS}"),
                ));
            }
            Duration::try_from_secs_f64(secs)
                .map_err(|_| FieldError::new(field, format!("not a duration: {DURATION_FORMS}")))
        }
        Value::String(text) => corral::duration::parse(text)
            .map_err(|error| FieldError::new(field, format!("{error}; {DURATION_FORMS}"))),
        _ => Err(FieldError::new(
            field,
            format!("must be a number or a string: {DURATION_FORMS}"),
        )),
    }
}

/// The arguments of `read_output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadArgs {
    /// The run.
    pub id: String,
    /// Where to read standard output from (default 0).
    pub stdout_offset: u64,
    /// Where to read standard error from (default 0).
    pub stderr_offset: u64,
    /// How much to read at most, per stream.
    pub max_bytes: Option<usize>,
}

/// The most `max_bytes` may ask for: 16 MiB.
const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// Checks the arguments of `read_output`.
///
/// # Errors
/// The first field that breaks a rule.
pub fn read_args(args: &Map<String, Value>) -> Result<ReadArgs, FieldError> {
    known_fields(args, &["id", "stdout_offset", "stderr_offset", "max_bytes"])?;
    let id = id_field(args)?;
    let offset = |field: &str| {
        given(args, field).map_or(Ok(0), |value| {
            integer(value).ok_or_else(|| {
                FieldError::new(
                    field,
                    "must be a non-negative integer: the `next` offset of the previous read, or 0",
                )
            })
        })
    };
    let stdout_offset = offset("stdout_offset")?;
    let stderr_offset = offset("stderr_offset")?;
    let max_bytes = match given(args, "max_bytes") {
        None => None,
        Some(value) => {
            let bytes = integer(value)
                .filter(|bytes| (1..=MAX_READ_BYTES).contains(bytes))
                .and_then(|bytes| usize::try_from(bytes).ok())
                .ok_or_else(|| {
                    FieldError::new(
                        "max_bytes",
                        format!(
                            "must be a positive integer of at most {MAX_READ_BYTES} (16 MiB), \
                             or left out for the default"
                        ),
                    )
                })?;
            Some(bytes)
        }
    };
    Ok(ReadArgs {
        id,
        stdout_offset,
        stderr_offset,
        max_bytes,
    })
}

/// The arguments of `wait_run`.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitArgs {
    /// The run.
    pub id: String,
    /// How long to wait at most.
    pub timeout: Option<Duration>,
}

/// Checks the arguments of `wait_run`.
///
/// # Errors
/// The first field that breaks a rule.
pub fn wait_args(args: &Map<String, Value>) -> Result<WaitArgs, FieldError> {
    known_fields(args, &["id", "timeout"])?;
    let id = id_field(args)?;
    let timeout = given(args, "timeout")
        .map(|value| duration("timeout", value))
        .transpose()?;
    Ok(WaitArgs { id, timeout })
}

/// Checks the arguments of `kill_run`: `{id}`.
///
/// # Errors
/// An unknown field, or an `id` that breaks its rule.
pub fn id_args(args: &Map<String, Value>) -> Result<String, FieldError> {
    known_fields(args, &["id"])?;
    id_field(args)
}

/// Checks the arguments of a tool that takes none (`list_runs`).
///
/// # Errors
/// Any field.
pub fn no_args(args: &Map<String, Value>) -> Result<(), FieldError> {
    known_fields(args, &[])
}

/// The longest run id accepted, in characters.
const MAX_ID_CHARS: usize = 64;

fn id_field(args: &Map<String, Value>) -> Result<String, FieldError> {
    const RULE: &str = "must be a run id: the non-empty string (at most 64 characters) \
                        that `run` answered with `background: true`";
    match given(args, "id") {
        Some(Value::String(id)) if !id.is_empty() && id.chars().count() <= MAX_ID_CHARS => {
            Ok(id.clone())
        }
        None => Err(FieldError::new(
            "id",
            "is required: give the run id that `run` answered with `background: true`",
        )),
        Some(_) => Err(FieldError::new("id", RULE)),
    }
}

/// Refuses the first field not in `allowed`.
fn known_fields(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), FieldError> {
    let Some(unknown) = args.keys().find(|key| !allowed.contains(&key.as_str())) else {
        return Ok(());
    };
    let rule = if allowed.is_empty() {
        "unknown field: this tool takes no arguments; call it with {}".to_owned()
    } else {
        let names: Vec<String> = allowed.iter().map(|name| format!("`{name}`")).collect();
        format!("unknown field: the allowed fields are {}", names.join(", "))
    };
    Err(FieldError::new(unknown.clone(), rule))
}

/// The field's value, `None` if absent or `null`.
fn given<'a>(args: &'a Map<String, Value>, field: &str) -> Option<&'a Value> {
    args.get(field).filter(|value| !value.is_null())
}

fn string<'a>(field: &str, value: &'a Value, rule: &str) -> Result<&'a str, FieldError> {
    value.as_str().ok_or_else(|| FieldError::new(field, rule))
}

fn no_nul(field: &str, text: &str) -> Result<(), FieldError> {
    if text.contains('\0') {
        return Err(FieldError::new(
            field,
            "must not contain a NUL character (\\u0000): the system cannot pass it to a program",
        ));
    }
    Ok(())
}

/// A non-negative integer, also when written as a float with no fraction
/// (`3.0`), up to 2^53 where floats stop being exact.
fn integer(value: &Value) -> Option<u64> {
    const EXACT: f64 = 9_007_199_254_740_992.0;
    let Value::Number(number) = value else {
        return None;
    };
    if let Some(int) = number.as_u64() {
        return Some(int);
    }
    let float = number.as_f64()?;
    if float.fract() == 0.0 && (0.0..=EXACT).contains(&float) {
        // Exact: an integer no larger than 2^53.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return Some(float as u64);
    }
    None
}

#[cfg(test)]
mod tests;
