//! What an entry starts, and its state: guarded by this corral, by another
//! corral, behind another wrapper, unguarded, or remote.

use std::path::Path;

use super::edit::{Field, Site, Value};

/// The state of one entry.
///
/// ```
/// use corral_mcp::guard::{Guard, State};
///
/// let words = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
/// let line = Guard::parse(&words("/usr/bin/corral mcp wrap -- uvx mcp-server-git")).unwrap();
/// let state = State::Guarded(line);
/// assert_eq!(state.name(), "guarded");
/// assert_eq!(State::Wrapped("mcp-proxy".into()).name(), "wrapped");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Started through `corral mcp wrap` by this corral's path.
    Guarded(Guard),
    /// Started through `corral mcp wrap` by another corral path.
    OtherCorral(Guard),
    /// Started through another proxy or supervisor (named): that program
    /// owns the server's tree.
    Wrapped(String),
    /// A stdio server started directly.
    Unguarded,
    /// An HTTP or SSE server: no process of this machine to guard.
    Remote,
    /// Neither a usable command nor a URL (why).
    Invalid(String),
}

impl State {
    /// The state's name in `status`: `guarded`, `other-corral`, `wrapped`,
    /// `unguarded`, `remote` or `invalid`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Guarded(_) => "guarded",
            Self::OtherCorral(_) => "other-corral",
            Self::Wrapped(_) => "wrapped",
            Self::Unguarded => "unguarded",
            Self::Remote => "remote",
            Self::Invalid(_) => "invalid",
        }
    }
}

/// A `corral mcp wrap [OPTIONS] -- COMMAND...` line, taken apart.
///
/// ```
/// use corral_mcp::guard::Guard;
///
/// let words = |line: &str| line.split(' ').map(String::from).collect::<Vec<_>>();
/// let guard = Guard::parse(&words("/opt/corral mcp wrap --close-grace 5s -- npx -y server-fs")).unwrap();
/// assert_eq!(guard.corral, "/opt/corral");
/// assert_eq!(guard.options, ["--close-grace", "5s"]);
/// assert_eq!(guard.inner, ["npx", "-y", "server-fs"]);
/// // Not a guard: another corral command, or no `--`.
/// assert_eq!(Guard::parse(&words("corral run -- npx server-fs")), None);
/// assert_eq!(Guard::parse(&words("corral mcp wrap npx server-fs")), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The corral path written.
    pub corral: String,
    /// The wrap options between `wrap` and `--`.
    pub options: Vec<String>,
    /// What it starts, after `--`.
    pub inner: Vec<String>,
}

impl Guard {
    /// How many words come before what it starts: the corral, `mcp`,
    /// `wrap`, the options and `--`.
    pub(crate) fn count(&self) -> usize {
        4 + self.options.len()
    }

    /// The words before what it starts.
    pub(crate) fn front(corral: &str, options: &[String]) -> Vec<String> {
        let mut front = vec![corral.to_owned(), "mcp".to_owned(), "wrap".to_owned()];
        front.extend(options.iter().cloned());
        front.push("--".to_owned());
        front
    }

    /// Reads `argv` as a guard line, if it is one.
    pub fn parse(argv: &[String]) -> Option<Self> {
        let (program, rest) = argv.split_first()?;
        let base = Path::new(program).file_name()?.to_str()?;
        if base != "corral" || rest.get(..2)? != ["mcp", "wrap"] {
            return None;
        }
        let dashes = rest.iter().position(|w| w == "--")?;
        Some(Self {
            corral: program.clone(),
            options: rest[2..dashes].to_vec(),
            inner: rest[dashes + 1..].to_vec(),
        })
    }
}

/// Proxies and supervisors that stand between a host and its server and
/// own the server's tree: an entry started through one is left to it.
/// (`npx`, `uvx` and their kind only fetch and start a package: they are
/// looked through, not counted.)
const WRAPPERS: &[&str] = &[
    "mcp-proxy",
    "supergateway",
    "mcp-gateway",
    "mcpo",
    "toolhive",
    "thv",
    "mcp-supervisor",
];

/// Package runners looked through to the package they start.
const RUNNERS: &[&str] = &["npx", "bunx", "pnpx", "uvx", "pipx", "pnpm", "yarn", "uv"];

/// Which wrapper `argv` starts the server through, if any.
pub fn wrapper(argv: &[String]) -> Option<String> {
    let base = |word: &str| {
        Path::new(word)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or(word)
            .to_owned()
    };
    let program = base(argv.first()?);
    if program == "docker" && argv.iter().skip(1).take(3).any(|w| w == "mcp") {
        return Some(String::from("docker mcp gateway"));
    }
    if WRAPPERS.contains(&program.as_str()) {
        return Some(program);
    }
    if RUNNERS.contains(&program.as_str()) {
        // The first word that is neither an option nor a runner verb is
        // the package; its name without a version.
        let package = argv[1..].iter().find(|w| {
            !w.starts_with('-') && !matches!(w.as_str(), "dlx" | "run" | "tool" | "exec")
        })?;
        let name = package
            .rsplit_once('@')
            .filter(|(name, _)| !name.is_empty())
            .map_or(package.as_str(), |(name, _)| name);
        let name = name.rsplit('/').next().unwrap_or(name);
        if WRAPPERS.contains(&name) {
            return Some(name.to_owned());
        }
    }
    None
}

/// What the entry starts: `command` and `args` (or opencode's one
/// `command` array).
///
/// # Errors
/// The fields are not strings (why).
pub fn argv(site: &Site) -> Result<Vec<String>, String> {
    let command = site
        .command
        .as_ref()
        .ok_or_else(|| String::from("no command"))?;
    let mut argv = match &command.value {
        Value::Str(program) => vec![program.clone()],
        Value::List(list) => list
            .strings()
            .ok_or_else(|| String::from("command holds a value that is not a string"))?,
        Value::Other => return Err(String::from("command is neither a string nor an array")),
    };
    match &site.args {
        None => {}
        Some(Field {
            value: Value::List(list),
            ..
        }) if matches!(command.value, Value::Str(_)) => argv.extend(
            list.strings()
                .ok_or_else(|| String::from("args holds a value that is not a string"))?,
        ),
        Some(_) => return Err(String::from("args is not an array of strings")),
    }
    if argv.first().is_none_or(String::is_empty) {
        return Err(String::from("the command is empty"));
    }
    Ok(argv)
}

/// The entry's state, `this` being this corral's path.
pub fn state(site: &Site, this: &str) -> State {
    let remote_kind = matches!(
        site.kind.as_deref(),
        Some("http" | "sse" | "streamable-http" | "streamableHttp" | "remote")
    );
    if remote_kind || (site.url && site.command.is_none()) {
        return State::Remote;
    }
    let argv = match argv(site) {
        Ok(argv) => argv,
        Err(why) => return State::Invalid(why),
    };
    if let Some(guard) = Guard::parse(&argv) {
        return if same_program(&guard.corral, this) {
            State::Guarded(guard)
        } else {
            State::OtherCorral(guard)
        };
    }
    match wrapper(&argv) {
        Some(by) => State::Wrapped(by),
        None => State::Unguarded,
    }
}

/// Whether two paths name the same program (the same file, else the same
/// text).
fn same_program(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn wrappers_are_found_through_package_runners_only() {
        assert_eq!(
            wrapper(&words("mcp-proxy --port 1 -- x")).as_deref(),
            Some("mcp-proxy")
        );
        assert_eq!(
            wrapper(&words("uvx mcp-proxy x")).as_deref(),
            Some("mcp-proxy")
        );
        assert_eq!(
            wrapper(&words("npx -y supergateway@3.1 --stdio x")).as_deref(),
            Some("supergateway")
        );
        assert_eq!(
            wrapper(&words("docker mcp gateway run")).as_deref(),
            Some("docker mcp gateway")
        );
        assert_eq!(
            wrapper(&words("npx -y @modelcontextprotocol/server-everything")),
            None
        );
        assert_eq!(wrapper(&words("docker run -i --rm mcp/fetch")), None);
        assert_eq!(wrapper(&words("node server.js")), None);
    }

    #[test]
    fn guard_lines_are_taken_apart() {
        let guard = Guard::parse(&words(
            "/usr/bin/corral mcp wrap --kill-after 5s -- npx -y x",
        ))
        .expect("a guard");
        assert_eq!(guard.options, words("--kill-after 5s"));
        assert_eq!(guard.inner, words("npx -y x"));
        assert_eq!(guard.count(), 6);
        assert_eq!(Guard::front("/c", &guard.options).len(), guard.count());
        assert_eq!(Guard::parse(&words("corral run -- x")), None);
        assert_eq!(Guard::parse(&words("corral mcp wrap x")), None);
    }
}
