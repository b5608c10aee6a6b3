//! The command line of `mcp-fixture`: every flag, parsed into [`Options`].

use std::path::PathBuf;
use std::time::Duration;

/// The usage text printed for a bad command line.
pub const USAGE: &str = "usage: mcp-fixture [--log FILE] [--pids FILE] [--spawn-log FILE] \
    [--helpers] [--handshake-delay-ms N] [--legacy] [--discover-error-code C] \
    [--discover-silent] [--handshake-error] [--exit-in-handshake] [--die-after-handshake] \
    [--stubborn] [--garbage] [--garbage-big BYTES] [--progress-ms N] [--http ADDR] [--hold-ms N]";

/// What the fixture was told to do (see the table in `main.rs`).
#[derive(Debug, Clone)]
pub struct Options {
    pub log: Option<PathBuf>,
    pub pids: Option<PathBuf>,
    pub spawn_log: Option<PathBuf>,
    pub helpers: bool,
    pub handshake_delay: Duration,
    pub legacy: bool,
    pub discover_error_code: i64,
    pub discover_silent: bool,
    pub handshake_error: bool,
    pub exit_in_handshake: bool,
    pub die_after_handshake: bool,
    /// After answering the handshake, close stdin (keep running, stdout open).
    pub close_stdin_after_handshake: bool,
    pub stubborn: bool,
    pub garbage: bool,
    pub garbage_big: usize,
    pub progress: Option<Duration>,
    pub http: Option<String>,
    pub hold: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            log: None,
            pids: None,
            spawn_log: None,
            helpers: false,
            handshake_delay: Duration::ZERO,
            legacy: false,
            discover_error_code: -32601,
            discover_silent: false,
            handshake_error: false,
            exit_in_handshake: false,
            die_after_handshake: false,
            close_stdin_after_handshake: false,
            stubborn: false,
            garbage: false,
            garbage_big: 2 * 1024 * 1024,
            progress: None,
            http: None,
            hold: None,
        }
    }
}

impl Options {
    /// Parses the arguments after the program name; `Err` names the bad one.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut opts = Self::default();
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--log" => opts.log = Some(value()?.into()),
                "--pids" => opts.pids = Some(value()?.into()),
                "--spawn-log" => opts.spawn_log = Some(value()?.into()),
                "--helpers" => opts.helpers = true,
                "--handshake-delay-ms" => opts.handshake_delay = millis(&flag, &value()?)?,
                "--legacy" => opts.legacy = true,
                "--discover-error-code" => opts.discover_error_code = number(&flag, &value()?)?,
                "--discover-silent" => opts.discover_silent = true,
                "--handshake-error" => opts.handshake_error = true,
                "--exit-in-handshake" => opts.exit_in_handshake = true,
                "--die-after-handshake" => opts.die_after_handshake = true,
                "--close-stdin-after-handshake" => opts.close_stdin_after_handshake = true,
                "--stubborn" => opts.stubborn = true,
                "--garbage" => opts.garbage = true,
                "--garbage-big" => opts.garbage_big = number(&flag, &value()?)?,
                "--progress-ms" => opts.progress = Some(millis(&flag, &value()?)?),
                "--http" => opts.http = Some(value()?),
                "--hold-ms" => opts.hold = Some(millis(&flag, &value()?)?),
                _ => return Err(format!("unknown argument {flag:?}")),
            }
        }
        if opts.progress == Some(Duration::ZERO) {
            return Err("--progress-ms must be at least 1".to_owned());
        }
        Ok(opts)
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{flag}: not a number: {value:?}"))
}

fn millis(flag: &str, value: &str) -> Result<Duration, String> {
    number(flag, value).map(Duration::from_millis)
}
