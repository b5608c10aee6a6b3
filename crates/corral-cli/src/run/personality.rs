//! Who a run speaks as: corral itself (`corral run`), or GNU `timeout`,
//! when corral was started under that name (`crate::timeout` reads its
//! command line). Every place where the two differ asks the personality:
//! the messages, what `-v` shows, how a received signal ends the tree, the
//! exit status; and GNU's voice (its `-v` lines, its messages, its quoting)
//! is here.

use std::ffi::{OsStr, OsString};

use corral::{Error, Exit, Signal};

use crate::{
    cli::RunArgs,
    kit::{exit::Status, signals},
};

/// Who a run speaks as.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Personality {
    /// `corral run`.
    #[default]
    Corral,
    /// GNU `timeout`, started under this name (`argv[0]`): GNU's messages
    /// prefixed with it, and GNU's 137 after an escalation.
    Timeout(String),
}

impl Personality {
    /// The personality `args` ask for.
    pub fn of(args: &RunArgs) -> Self {
        args.timeout_name
            .clone()
            .map_or(Self::Corral, Self::Timeout)
    }

    /// Whether `-v` means corral's own lines (its debug log, what it
    /// received and did, the report's signals and notes): as `timeout`, -v
    /// is GNU's lines only.
    pub fn own_verbose(&self, verbose: bool) -> bool {
        verbose && *self == Self::Corral
    }

    /// The signals handled whatever the parent left ignored: GNU's, as
    /// `timeout`.
    pub fn handled_even_if_ignored(&self, signal: Option<Signal>) -> Vec<Signal> {
        match self {
            Self::Corral => Vec::new(),
            Self::Timeout(_) => signals::gnu_handled(signal),
        }
    }

    /// Whether a signal that ends the tree is the one passed on to it (then
    /// the grace and `SIGKILL`), as GNU's is; else corral's own policy ends
    /// it.
    pub fn passes_on_the_ending_signal(&self) -> bool {
        matches!(self, Self::Timeout(_))
    }

    /// Says on standard error why the spawn failed, and returns the message.
    pub fn spawn_failed(&self, command: &[OsString], error: &Error) -> String {
        match self {
            Self::Corral => {
                let message = corral_spawn_message(error);
                say!("{message}");
                message
            }
            Self::Timeout(name) => {
                let message = spawn_message(command, error);
                say(name, &message);
                message
            }
        }
    }

    /// The callback that says each signal as it is sent, if any: GNU's `-v`
    /// lines, as `timeout`.
    pub fn on_signal(
        &self,
        command: &[OsString],
        verbose: bool,
    ) -> Option<impl Fn(Option<Signal>) + Send + Sync + 'static> {
        match self {
            Self::Timeout(name) if verbose => Some(self::verbose(name, command)),
            _ => None,
        }
    }

    /// The exit status for `status`, the run's: as `timeout`, GNU's (137
    /// after an escalation), and timed out whenever its alarm came
    /// (`late_alarm`: during the cleanup of another signal).
    pub fn status(
        &self,
        status: Status,
        leader: Option<Exit>,
        preserve_status: bool,
        late_alarm: bool,
    ) -> Status {
        match self {
            Self::Corral => status,
            Self::Timeout(_) if late_alarm => {
                Status::of_run(corral::Outcome::TimedOut, leader, preserve_status, None)
                    .as_gnu(leader)
            }
            Self::Timeout(_) => status.as_gnu(leader),
        }
    }
}

/// corral's one-line message for a failed spawn, with a hint where the fix
/// is an option.
fn corral_spawn_message(error: &Error) -> String {
    match error {
        Error::BackendUnavailable { .. } => {
            format!("{error}; choose another with --backend (see corral capabilities)")
        }
        Error::Cgroup { .. } => format!("{error}; try --backend subreaper"),
        Error::LimitUnavailable { .. } => {
            format!("{error} (corral capabilities lists what this host supports)")
        }
        _ => error.to_string(),
    }
}

/// `-v`: what says GNU's line for each signal as it is sent (`EXIT` when
/// `-s 0` sends nothing at the deadline), for `corral::Command::on_signal`.
fn verbose(name: &str, command: &[OsString]) -> impl Fn(Option<Signal>) + Send + Sync + 'static {
    let program = quote(command.first().map_or(OsStr::new(""), OsString::as_os_str));
    let name = name.to_owned();
    move |signal: Option<Signal>| {
        let label = match signal {
            None => "EXIT".to_owned(),
            Some(signal) => signal
                .gnu_name()
                .unwrap_or_else(|| signal.number().to_string()),
        };
        say(
            &name,
            &format!("sending signal {label} to command {program}"),
        );
    }
}

/// GNU's message for a command that could not be started.
fn spawn_message(command: &[OsString], error: &Error) -> String {
    let program = quote(command.first().map_or(OsStr::new(""), OsString::as_os_str));
    let reason = match error {
        // strerror(ENOENT), as execvp would have failed.
        Error::Spawn {
            failure: corral::SpawnFailure::NotFound,
            ..
        } => "No such file or directory".to_owned(),
        Error::Spawn { source, .. } => {
            let text = source.to_string();
            // "No such file or directory (os error 2)" as strerror says it.
            text.split(" (os error").next().unwrap_or(&text).to_owned()
        }
        other => return other.to_string(),
    };
    format!("failed to run command {program}: {reason}")
}

/// One line `NAME: message` on standard error; a closed standard error is
/// not an error.
pub fn say(name: &str, message: &str) {
    say_raw(&format!("{name}: {message}"));
}

pub fn say_raw(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// `text` quoted as GNU's `quote()` does: ‘…’ in a UTF-8 locale, '…' with
/// `\'` otherwise, control characters (and, outside UTF-8, non-ASCII bytes)
/// as C escapes.
pub fn quote(text: &OsStr) -> String {
    let utf8 = ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .is_some_and(|locale| {
            let lower = locale.to_ascii_lowercase();
            lower.contains("utf-8") || lower.contains("utf8")
        });
    quote_in(text, utf8)
}

fn quote_in(text: &OsStr, utf8: bool) -> String {
    let bytes = text.as_encoded_bytes();
    let (open, close) = if utf8 {
        ("\u{2018}", "\u{2019}")
    } else {
        ("'", "'")
    };
    let mut out = String::from(open);
    let mut rest = bytes;
    while let Some((&first, tail)) = rest.split_first() {
        if utf8 && !first.is_ascii() {
            // A whole valid character stays as it is.
            let len = match first {
                0xc2..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf4 => 4,
                _ => 1,
            };
            if let Some(Ok(ch)) = rest.get(..len).map(std::str::from_utf8) {
                out.push_str(ch);
                rest = &rest[len..];
                continue;
            }
        }
        match first {
            b'\x07' => out.push_str("\\a"),
            b'\x08' => out.push_str("\\b"),
            b'\x0c' => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'\x0b' => out.push_str("\\v"),
            b'\\' => out.push_str("\\\\"),
            b'\'' if !utf8 => out.push_str("\\'"),
            b' '..=b'~' => out.push(char::from(first)),
            _ => out.push_str(&format!("\\{first:03o}")),
        }
        rest = tail;
    }
    out.push_str(close);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_is_gnus() {
        let quoted = |text: &str, utf8| quote_in(OsStr::new(text), utf8);
        assert_eq!(quoted("sleep", false), "'sleep'");
        assert_eq!(quoted("sleep", true), "\u{2018}sleep\u{2019}");
        assert_eq!(quoted("it's a\\b", false), "'it\\'s a\\\\b'");
        assert_eq!(quoted("it's", true), "\u{2018}it's\u{2019}");
        assert_eq!(quoted("a\tb\u{1}é", false), "'a\\tb\\001\\303\\251'");
        assert_eq!(quoted("a\tb\u{1}é", true), "\u{2018}a\\tb\\001é\u{2019}");
    }
}
