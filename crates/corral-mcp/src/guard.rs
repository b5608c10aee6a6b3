//! `corral mcp guard`: every MCP server entry of every known agent host on
//! this machine put behind `corral mcp wrap`, and taken back out.
//!
//! Guarding an entry rewrites it so the host starts `CORRAL mcp wrap
//! [OPTIONS] -- COMMAND ARGS...` instead of `COMMAND ARGS...`; every other
//! field, and every other byte of the file, stays. Taking the guard off
//! puts back the bytes `on` replaced (recorded in the state directory),
//! or, without a record or when the entry changed since, rebuilds
//! `command` and `args` from the words after `--`.
//!
//! # Layout
//! - `hosts`: the hosts, their files per scope and where the servers
//!   are in them ([`HOSTS`]: a new host is one entry).
//! - `json` and `toml`: reading a config with the byte span of every
//!   value (JSONC comments, TOML comments and layout kept).
//! - `edit`: where an entry's `command` and `args` are, and the text
//!   edits of `on` and `off`, the same for both formats.
//! - `entry`: what an entry starts and its [`State`].
//! - `file`: the trust rule, the atomic write that keeps a host's
//!   concurrent change, the backups; `record`: what `on` replaced.
//!
//! ```
//! use corral_mcp::guard::{self, Action, Done, Places, Selection, Settings, State};
//!
//! # fn main() -> std::io::Result<()> {
//! let home = std::env::temp_dir().join(format!("guard-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&home)?;
//! let config = home.join(".claude.json");
//! let original = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-fs"]}}}"#;
//! std::fs::write(&config, original)?;
//!
//! let places = Places {
//!     home: home.clone(),
//!     claude_config: home.clone(),
//!     config: home.join(".config"),
//!     codex_home: home.join(".codex"),
//!     project: home.clone(),
//! };
//! let settings = Settings { places, this: "/usr/local/bin/corral".into(), state: home.join("state") };
//! let claude = Selection { hosts: vec![guard::host("claude-code").unwrap()], servers: vec![] };
//!
//! let (listed, problems) = guard::status(&settings, &claude);
//! assert!(problems.is_empty());
//! assert_eq!((listed[0].name.as_str(), &listed[0].state), ("fs", &State::Unguarded));
//!
//! let on = guard::change(&settings, &claude, &Action::On(vec![]), false);
//! assert_eq!(on.entries[0].done, Done::Guarded);
//! let (listed, _) = guard::status(&settings, &claude);
//! let State::Guarded(line) = &listed[0].state else { panic!("{:?}", listed[0].state) };
//! assert_eq!(line.corral, "/usr/local/bin/corral");
//! assert_eq!(line.inner, ["npx", "-y", "server-fs"]);
//!
//! // `off` gives back the file byte for byte.
//! let off = guard::change(&settings, &claude, &Action::Off, false);
//! assert_eq!(off.entries[0].done, Done::Unguarded);
//! assert_eq!(std::fs::read_to_string(&config)?, original);
//! # std::fs::remove_dir_all(&home)
//! # }
//! ```

pub(crate) mod edit;
pub(crate) mod entry;
pub(crate) mod file;
pub(crate) mod hosts;
pub(crate) mod json;
mod record;
pub(crate) mod toml;

use std::{
    io,
    path::{Path, PathBuf},
};

pub use entry::{Guard, State};
pub use hosts::{HOSTS, Host, Places, Scope, host};

use edit::{Edit, Site};
use hosts::{Config, Format};
use record::{Records, Region};

/// What `corral mcp guard` works with.
///
/// ```
/// use std::path::PathBuf;
///
/// use corral_mcp::guard::{Places, Settings};
///
/// let home = PathBuf::from("/home/alice");
/// let places = Places {
///     claude_config: home.clone(),
///     config: home.join(".config"),
///     codex_home: home.join(".codex"),
///     project: home.join("src/app"),
///     home,
/// };
/// let settings = Settings {
///     // `$XDG_STATE_HOME/corral/guard`, else under `~/.local/state`.
///     state: Settings::state_dir(&places.home),
///     places,
///     this: "/usr/local/bin/corral".into(),
/// };
/// assert!(settings.state.ends_with("corral/guard"));
/// assert_eq!(settings.backups(), settings.state.join("backups"));
/// ```
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the hosts' files are.
    pub places: Places,
    /// This corral's absolute path (what `on` writes).
    pub this: String,
    /// Where backups and records go (`$XDG_STATE_HOME/corral/guard`, else
    /// `~/.local/state/corral/guard`).
    pub state: PathBuf,
}

impl Settings {
    /// The state directory from the environment: `$XDG_STATE_HOME/corral/guard`,
    /// else `HOME/.local/state/corral/guard`.
    pub fn state_dir(home: &Path) -> PathBuf {
        std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".local/state"))
            .join("corral/guard")
    }

    /// Where backups of original files go.
    pub fn backups(&self) -> PathBuf {
        self.state.join("backups")
    }

    fn records(&self) -> PathBuf {
        self.state.join("records")
    }
}

/// Which entries a command acts on: all hosts and servers when empty.
///
/// ```
/// use corral_mcp::guard::{Selection, host};
///
/// let everything = Selection::default();
/// // `--host codex --server github`.
/// let one = Selection { hosts: host("codex").into_iter().collect(), servers: vec!["github".into()] };
/// assert!(everything.hosts.is_empty() && one.hosts.len() == 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// `--host`.
    pub hosts: Vec<&'static Host>,
    /// `--server`.
    pub servers: Vec<String>,
}

impl Selection {
    fn hosts(&self) -> Vec<&'static Host> {
        if self.hosts.is_empty() {
            HOSTS.iter().collect()
        } else {
            self.hosts.clone()
        }
    }

    fn takes(&self, name: &str) -> bool {
        self.servers.is_empty() || self.servers.iter().any(|s| s == name)
    }

    fn names(&self, name: &str) -> bool {
        self.servers.iter().any(|s| s == name)
    }
}

/// One entry as `status` shows it.
///
/// ```
/// use corral_mcp::guard::Listed;
///
/// // One line of `corral mcp guard status`.
/// fn line(entry: &Listed) -> String {
///     let env = if entry.env.is_empty() { String::new() } else { format!(" [env: {}]", entry.env.join(", ")) };
///     format!("{} {} {}: {} {}{env}", entry.host, entry.scope.name(), entry.name, entry.state.name(), entry.argv.join(" "))
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Listed {
    /// The host's id.
    pub host: &'static str,
    /// The file.
    pub file: PathBuf,
    /// The scope.
    pub scope: Scope,
    /// The entry's name.
    pub name: String,
    /// What the host starts (empty for a remote or invalid entry).
    pub argv: Vec<String>,
    /// Its state.
    pub state: State,
    /// The names of the variables it sets (never their values).
    pub env: Vec<String>,
    /// Its working directory, when set.
    pub cwd: Option<String>,
}

/// A file left alone, and why: `status` and `change` go on with the
/// others.
///
/// ```
/// use corral_mcp::guard::Problem;
///
/// fn report(problems: &[Problem]) {
///     for problem in problems {
///         eprintln!("{}: {}", problem.file.display(), problem.message);
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// Why (with the line, for a file that does not parse).
    pub message: String,
}

/// Lists every entry of the selected hosts' files. Files that cannot be
/// read or parsed are reported and skipped.
pub fn status(settings: &Settings, selection: &Selection) -> (Vec<Listed>, Vec<Problem>) {
    let mut listed = Vec::new();
    let mut problems = Vec::new();
    for config in hosts::configs(&settings.places, &selection.hosts()) {
        let text = match file::read(&config.path) {
            Ok(Some(bytes)) => match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(_) => {
                    problems.push(problem(&config, "not UTF-8 text; left alone".into()));
                    continue;
                }
            },
            Ok(None) => continue,
            Err(error) => {
                problems.push(problem(&config, format!("cannot read it: {error}")));
                continue;
            }
        };
        match sites(&config, &text) {
            Ok(found) => {
                for (scope, site) in found.into_iter().filter(|(_, s)| selection.takes(&s.name)) {
                    listed.push(Listed {
                        host: config.host.id,
                        file: config.path.clone(),
                        scope,
                        argv: entry::argv(&site).unwrap_or_default(),
                        state: entry::state(&site, &settings.this),
                        env: site.env.clone(),
                        cwd: site.cwd.clone(),
                        name: site.name,
                    });
                }
            }
            Err(error) => problems.push(problem(&config, parse_message(&error))),
        }
    }
    (listed, problems)
}

fn problem(config: &Config, message: String) -> Problem {
    Problem {
        file: config.path.clone(),
        message,
    }
}

fn parse_message(error: &json::SyntaxError) -> String {
    format!(
        "line {}: {}; the file does not parse and was left alone (the host may not read it either)",
        error.line, error.message
    )
}

/// What a guard path is wrong for, if anything: it no longer exists, or
/// it is in a build directory (cargo's `target/`) that a rebuild or a
/// `cargo clean` replaces.
///
/// ```
/// use corral_mcp::guard::path_warning;
///
/// assert!(path_warning("corral").unwrap().contains("not an absolute path"));
/// assert!(path_warning("/nonexistent/corral").unwrap().contains("no longer exists"));
/// assert_eq!(path_warning("/"), None);
/// ```
pub fn path_warning(corral: &str) -> Option<String> {
    let path = Path::new(corral);
    if !path.is_absolute() {
        return Some(String::from(
            "is not an absolute path: the host finds it only through its own PATH",
        ));
    }
    if !path.exists() {
        return Some(String::from(
            "no longer exists: the host cannot start this server; run corral mcp guard on \
             (to point it at this corral) or off",
        ));
    }
    let words: Vec<_> = path.components().map(|c| c.as_os_str()).collect();
    let in_target = words
        .windows(2)
        .any(|w| w[0] == "target" && (w[1] == "debug" || w[1] == "release"));
    in_target.then(|| {
        String::from(
            "is in a build directory (target/): a rebuild or cargo clean breaks the server; \
             install corral (cargo install --path crates/corral-cli) and run on again",
        )
    })
}

/// `on` (with the wrap options) or `off`.
///
/// ```
/// use corral_mcp::guard::Action;
///
/// // `corral mcp guard on -- --close-grace 5s`: every guarded line gets the options.
/// let on = Action::On(vec!["--close-grace".into(), "5s".into()]);
/// assert!(matches!(on, Action::On(options) if options.len() == 2));
/// ```
#[derive(Debug, Clone)]
pub enum Action {
    /// Guard, with these `corral mcp wrap` options.
    On(Vec<String>),
    /// Take the guard away.
    Off,
}

/// What happened to one entry.
///
/// ```
/// use corral_mcp::guard::Done;
///
/// let done = Done::Left("behind mcp-proxy, which owns its tree".into());
/// let word = match &done {
///     Done::Guarded => "guarded",
///     Done::Unguarded => "unguarded",
///     Done::Left(_) => "left",
/// };
/// assert_eq!(word, "left");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// Now started through `corral mcp wrap`.
    Guarded,
    /// The guard was taken away.
    Unguarded,
    /// Left as it was (why).
    Left(String),
}

/// One entry acted on.
///
/// ```
/// use corral_mcp::guard::{Changed, Done};
///
/// fn guarded(entries: &[Changed]) -> Vec<&str> {
///     entries.iter().filter(|entry| entry.done == Done::Guarded).map(|entry| entry.name.as_str()).collect()
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Changed {
    /// The host's id.
    pub host: &'static str,
    /// The file.
    pub file: PathBuf,
    /// The scope.
    pub scope: Scope,
    /// The entry's name.
    pub name: String,
    /// What happened.
    pub done: Done,
}

/// One file changed (or, for a dry run, that would be).
///
/// ```
/// use corral_mcp::guard::Written;
///
/// // What a dry run may print: never `before` and `after`, which hold secrets.
/// fn shown(written: &Written) -> String {
///     let (before, after) = &written.shown;
///     format!("{}:\n- {before}\n+ {after}", written.file.display())
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Written {
    /// The file.
    pub file: PathBuf,
    /// Its text before.
    pub before: String,
    /// Its text after.
    pub after: String,
    /// Where its original bytes were kept (none for a dry run).
    pub backup: Option<PathBuf>,
    /// `before` and `after` as they may be printed: the values of `env`,
    /// `environment` and headers replaced by `"***"`.
    pub shown: (String, String),
}

/// What `on` or `off` did.
///
/// ```
/// use corral_mcp::guard::Outcome;
///
/// // `corral mcp guard` exits 1 when a file was left alone.
/// fn exit_code(outcome: &Outcome) -> i32 {
///     i32::from(!outcome.problems.is_empty())
/// }
/// assert_eq!(exit_code(&Outcome::default()), 0);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Every selected entry and what happened to it.
    pub entries: Vec<Changed>,
    /// The files changed.
    pub files: Vec<Written>,
    /// The files left alone, and why.
    pub problems: Vec<Problem>,
}

/// Guards (`on`) or unguards (`off`) the selected entries of every
/// selected host's files; with `dry_run`, only says what would change.
/// A file that cannot be changed is reported and the others are still
/// done.
pub fn change(
    settings: &Settings,
    selection: &Selection,
    action: &Action,
    dry_run: bool,
) -> Outcome {
    let mut outcome = Outcome::default();
    for config in hosts::configs(&settings.places, &selection.hosts()) {
        if let Err(message) =
            change_file(settings, selection, action, dry_run, &config, &mut outcome)
        {
            outcome.problems.push(problem(&config, message));
        }
    }
    outcome
}

/// The changes of one file: the new text, what happened to each entry,
/// and the records to keep (`None`: drop).
struct Plan {
    text: String,
    entries: Vec<(Scope, String, Done)>,
    regions: Vec<(String, Option<Region>)>,
}

fn change_file(
    settings: &Settings,
    selection: &Selection,
    action: &Action,
    dry_run: bool,
    config: &Config,
    outcome: &mut Outcome,
) -> Result<(), String> {
    let opened = match file::open(&config.path) {
        Ok(Some(opened)) => opened,
        Ok(None) => return Ok(()),
        Err(error) => return Err(format!("left alone: {error}")),
    };
    let records_path = record::path(&settings.records(), &opened.real);
    let mut records = record::load(&records_path);
    let text = utf8(&opened.bytes)?;
    let first = plan(settings, selection, action, config, &text, &records)?;
    let report = |outcome: &mut Outcome, plan: &Plan| {
        for (scope, name, done) in &plan.entries {
            outcome.entries.push(Changed {
                host: config.host.id,
                file: config.path.clone(),
                scope: *scope,
                name: name.clone(),
                done: done.clone(),
            });
        }
    };
    if first.text == text {
        report(outcome, &first);
        return Ok(());
    }
    if dry_run {
        report(outcome, &first);
        outcome.files.push(Written {
            file: config.path.clone(),
            shown: (masked(config, &text), masked(config, &first.text)),
            before: text,
            after: first.text,
            backup: None,
        });
        return Ok(());
    }
    let backup =
        file::backup(&settings.backups(), &opened.real, &opened.bytes).map_err(|error| {
            format!(
                "left alone: cannot keep its original bytes in {} ({error}); make that directory \
             writable or set XDG_STATE_HOME",
                settings.backups().display()
            )
        })?;
    let mut last = None;
    let written = file::replace(&opened, &mut |bytes| {
        let text = utf8(bytes).map_err(io::Error::other)?;
        let plan =
            plan(settings, selection, action, config, &text, &records).map_err(io::Error::other)?;
        let new = plan.text.clone().into_bytes();
        last = Some(plan);
        Ok(new)
    });
    let (before, after) = written.map_err(|error| {
        format!(
            "left alone: {error} (its original bytes are in {})",
            backup.display()
        )
    })?;
    let plan = last.ok_or("left alone: nothing was planned")?;
    for (key, region) in &plan.regions {
        match region {
            Some(region) => records.entries.insert(key.clone(), region.clone()),
            None => records.entries.remove(key),
        };
    }
    if let Err(error) = record::store(&records_path, &records) {
        tracing::warn!(%error, path = %records_path.display(), "cannot keep the guard's records; off will rebuild the entries instead");
    }
    report(outcome, &plan);
    let (before, after) = (
        String::from_utf8_lossy(&before).into_owned(),
        String::from_utf8_lossy(&after).into_owned(),
    );
    outcome.files.push(Written {
        file: config.path.clone(),
        shown: (masked(config, &before), masked(config, &after)),
        before,
        after,
        backup: Some(backup),
    });
    Ok(())
}

/// `text` with every secret value of its entries replaced by `"***"`.
fn masked(config: &Config, text: &str) -> String {
    let Ok(found) = sites(config, text) else {
        return String::from("(not shown: the text does not parse)\n");
    };
    let edits: Vec<Edit> = found
        .iter()
        .flat_map(|(_, site)| {
            site.secrets
                .iter()
                .map(|span| (span.clone(), String::from("\"***\"")))
        })
        .collect();
    edit::apply(text, &edits)
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| String::from("left alone: not UTF-8 text"))
}

/// The entries of `config` in `text`, with their scopes.
fn sites(config: &Config, text: &str) -> Result<Vec<(Scope, Site)>, json::SyntaxError> {
    let mut found = Vec::new();
    match config.host.format {
        Format::Json => {
            let Some(root) = json::parse(text)? else {
                return Ok(found);
            };
            for (scope, keys) in &config.containers {
                let inner: Vec<&str> = config
                    .containers
                    .iter()
                    .filter(|(_, other)| other.len() == keys.len() + 1 && other.starts_with(keys))
                    .filter_map(|(_, other)| other.last().map(String::as_str))
                    .collect();
                found.extend(
                    json::sites(text, &root, keys, &inner)
                        .into_iter()
                        .map(|s| (*scope, s)),
                );
            }
        }
        Format::Toml => {
            let doc = toml::parse(text)?;
            for (scope, keys) in &config.containers {
                found.extend(
                    toml::sites(text, &doc, keys)
                        .into_iter()
                        .map(|s| (*scope, s)),
                );
            }
        }
    }
    Ok(found)
}

fn plan(
    settings: &Settings,
    selection: &Selection,
    action: &Action,
    config: &Config,
    text: &str,
    records: &Records,
) -> Result<Plan, String> {
    let found = sites(config, text).map_err(|error| parse_message(&error))?;
    let mut edits: Vec<Edit> = Vec::new();
    let mut entries = Vec::new();
    let mut changed = Vec::new();
    let this = settings.this.as_str();
    for (scope, site) in found.iter().filter(|(_, s)| selection.takes(&s.name)) {
        let key = record::key(&site.container, &site.name);
        let state = entry::state(site, this);
        let (done, new_edits) = match (action, &state) {
            (Action::On(options), State::Unguarded) => guard(site, this, options),
            (Action::On(options), State::Wrapped(by)) => {
                if selection.names(&site.name) {
                    guard(site, this, options)
                } else {
                    (
                        Done::Left(format!(
                            "started through {by}, which owns the server's tree; name it with \
                             --server {} to guard it anyway",
                            site.name
                        )),
                        Vec::new(),
                    )
                }
            }
            (Action::On(options), State::Guarded(guard)) => (
                Done::Left(if guard.options == *options {
                    String::from("already guarded")
                } else {
                    format!(
                        "already guarded, with other wrap options ({}); run off, then on, to change them",
                        guard.options.join(" ")
                    )
                }),
                Vec::new(),
            ),
            (Action::On(_), State::OtherCorral(guard)) => (
                Done::Left(format!(
                    "guarded by another corral, {}{}; run off, then on, to guard it with this one",
                    guard.corral,
                    if Path::new(&guard.corral).exists() {
                        ""
                    } else {
                        ", which no longer exists"
                    }
                )),
                Vec::new(),
            ),
            (Action::On(_), State::Remote) => (
                Done::Left(String::from(
                    "remote (HTTP or SSE): no process here to guard",
                )),
                Vec::new(),
            ),
            (Action::On(_), State::Invalid(why)) => {
                (Done::Left(format!("{why}: left alone")), Vec::new())
            }
            (Action::Off, State::Guarded(guard) | State::OtherCorral(guard)) => {
                let recorded = records.entries.get(&key).and_then(|region| {
                    let span = edit::region(site)?;
                    (text.get(span.clone())? == region.guarded)
                        .then(|| (span, region.original.clone()))
                });
                match recorded {
                    Some(edit) => (Done::Unguarded, vec![edit]),
                    None => match edit::unguard(site, guard.count(), &guard.inner) {
                        Some(edits) => (Done::Unguarded, edits),
                        None => (
                            Done::Left(String::from("cannot rewrite this entry; edit it by hand")),
                            Vec::new(),
                        ),
                    },
                }
            }
            (Action::Off, _) => {
                if selection.names(&site.name) {
                    (Done::Left(String::from("not guarded")), Vec::new())
                } else {
                    continue;
                }
            }
        };
        if !new_edits.is_empty() {
            changed.push((key, site.clone(), done.clone()));
            edits.extend(new_edits);
        }
        entries.push((*scope, site.name.clone(), done));
    }
    if edits.is_empty() {
        return Ok(Plan {
            text: text.to_owned(),
            entries,
            regions: Vec::new(),
        });
    }
    let new = edit::apply(text, &edits);
    // The result is read back: it must parse, and each changed entry must
    // be in the state it was changed to.
    let after = sites(config, &new).map_err(|error| {
        format!(
            "left alone: the changed text would not parse ({}); this is a bug in corral, please report it",
            parse_message(&error)
        )
    })?;
    let mut regions = Vec::new();
    for (key, old, done) in changed {
        let Some((_, site)) = after
            .iter()
            .find(|(_, s)| s.name == old.name && s.container == old.container)
        else {
            return Err(String::from(
                "left alone: a changed entry went missing; this is a bug in corral",
            ));
        };
        let state = entry::state(site, this);
        let ok = match done {
            Done::Guarded => matches!(state, State::Guarded(_)),
            Done::Unguarded => !matches!(state, State::Guarded(_) | State::OtherCorral(_)),
            Done::Left(_) => true,
        };
        if !ok {
            return Err(format!(
                "left alone: entry {} would be {} after the change; this is a bug in corral",
                old.name,
                state.name()
            ));
        }
        let region = match done {
            Done::Guarded => {
                let before = edit::region(&old).and_then(|r| text.get(r).map(str::to_owned));
                let after = edit::region(site).and_then(|r| new.get(r).map(str::to_owned));
                before
                    .zip(after)
                    .map(|(original, guarded)| Region { original, guarded })
            }
            _ => None,
        };
        regions.push((key, region));
    }
    Ok(Plan {
        text: new,
        entries,
        regions,
    })
}

fn guard(site: &Site, this: &str, options: &[String]) -> (Done, Vec<Edit>) {
    match edit::guard(site, &Guard::front(this, options)) {
        Some(edits) => (Done::Guarded, edits),
        None => (
            Done::Left(String::from(
                "cannot rewrite this entry (command or args of an unexpected kind)",
            )),
            Vec::new(),
        ),
    }
}

#[cfg(test)]
mod tests;
