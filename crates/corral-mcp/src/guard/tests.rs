//! `on`, `off` and `status` on realistic samples of every host's files:
//! comments, unknown keys, CRLF, empty and missing files, entries already
//! guarded, behind another wrapper, remote; a writer racing the change;
//! root and another user's file.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
};

use corral_tests::paths::Scratch;

use super::*;

const THIS: &str = "/opt/corral/bin/corral";

const CLAUDE: &str = r#"{
  "numStartups": 42,
  "mcpServers": {
    "everything": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-everything"
      ],
      "env": {
        "API_KEY": "sk-secret-value"
      }
    },
    "bare": {
      "type": "stdio",
      "command": "/usr/local/bin/bare-server",
      "env": {}
    },
    "remote": {
      "type": "http",
      "url": "https://example.invalid/mcp"
    }
  },
  "projects": {
    "PROJECT": {
      "allowedTools": [],
      "mcpServers": {
        "local-one": {
          "type": "stdio",
          "command": "node",
          "args": ["server.js", "--stdio"],
          "env": {}
        }
      }
    }
  }
}"#;

const DOT_MCP: &str = "{\r\n\t\"mcpServers\": {\r\n\t\t\"team\": {\r\n\t\t\t\"command\": \"uvx\",\r\n\t\t\t\"args\": [\"team-mcp\"]\r\n\t\t}\r\n\t}\r\n}\r\n";

const DESKTOP: &str = r#"{
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Documents"]
        },
        "proxied": {
            "command": "uvx",
            "args": ["mcp-proxy", "--", "python", "server.py"]
        }
    }
}
"#;

const CODEX: &str = r#"# Codex settings
model = "o4-mini"

[mcp_servers.fs]
# the file server
command = "npx"   # runner
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
env_vars = ["MARKER"]
startup_timeout_sec = 20

[mcp_servers.fs.env]
TOKEN = "secret"

[mcp_servers.noargs]
command = "/opt/bin/noargs"
cwd = "/tmp"

[mcp_servers.docs]
url = "https://example.invalid/mcp"

[mcp_servers]
inline = { command = "python3", args = ["-m", "inline_server"] }
dotted.command = "dotted-server"
"#;

const GEMINI: &str = r#"{
  "theme": "Default",
  "mcpServers": {
    "py": {
      "command": "python3",
      "args": ["-m", "my_server"],
      "cwd": "./servers",
      "timeout": 30000,
      "trust": false
    },
    "web": {
      "httpUrl": "https://example.invalid/mcp",
      "headers": {"Authorization": "Bearer x"}
    }
  }
}
"#;

const OPENCODE: &str = r#"{
  "$schema": "https://opencode.ai/config.json",
  // MCP servers
  "mcp": {
    "everything": {
      "type": "local",
      "command": ["npx", "-y", "@modelcontextprotocol/server-everything"], // the demo
      "environment": { "KEY": "value" },
      "enabled": true,
    },
    "context": {
      "type": "remote",
      "url": "https://example.invalid/mcp",
    },
    /* the newer shape */
    "servers": {
      "nested": { "type": "local", "command": ["bun", "x", "nested-mcp"] },
    },
  },
}
"#;

const CURSOR: &str = r#"{"mcpServers":{"a":{"command":"npx","args":["-y","a-mcp"]},"b":{"command":"b-mcp","args":[]}}}"#;

const VSCODE: &str = r#"{
	"inputs": [
		{ "type": "promptString", "id": "key", "description": "API key", "password": true }
	],
	"servers": {
		"memory": {
			"type": "stdio",
			"command": "npx",
			"args": ["-y", "@modelcontextprotocol/server-memory"],
			"env": { "KEY": "${input:key}" }
		}
	}
}
"#;

/// A home directory with every host's files, and the settings for it.
struct Machine {
    _scratch: Scratch,
    settings: Settings,
}

impl Machine {
    fn new(name: &str) -> Self {
        let scratch = Scratch::new(name);
        let home = scratch.path("home");
        let project = home.join("src/project");
        std::fs::create_dir_all(&project).expect("project dir");
        let places = Places {
            claude_config: home.clone(),
            config: home.join(".config"),
            codex_home: home.join(".codex"),
            project: project.clone(),
            home: home.clone(),
        };
        let settings = Settings {
            places,
            this: THIS.to_owned(),
            state: home.join(".local/state/corral/guard"),
        };
        Self {
            _scratch: scratch,
            settings,
        }
    }

    fn home(&self) -> &Path {
        &self.settings.places.home
    }

    fn project(&self) -> &Path {
        &self.settings.places.project
    }

    fn write(&self, path: PathBuf, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(&path, text).expect("write");
        path
    }

    /// Every host's files, as samples; returns their paths.
    fn every_host(&self) -> Vec<PathBuf> {
        let home = self.home();
        let project = self.project();
        let claude = CLAUDE.replace("PROJECT", &project.to_string_lossy());
        vec![
            self.write(home.join(".claude.json"), &claude),
            self.write(project.join(".mcp.json"), DOT_MCP),
            self.write(
                home.join(".config/Claude/claude_desktop_config.json"),
                DESKTOP,
            ),
            self.write(home.join(".codex/config.toml"), CODEX),
            self.write(home.join(".gemini/settings.json"), GEMINI),
            self.write(home.join(".config/opencode/opencode.jsonc"), OPENCODE),
            self.write(home.join(".cursor/mcp.json"), CURSOR),
            self.write(project.join(".vscode/mcp.json"), VSCODE),
            // An empty file: no servers, nothing to do.
            self.write(project.join(".cursor/mcp.json"), ""),
        ]
    }

    fn snapshot(paths: &[PathBuf]) -> BTreeMap<PathBuf, Vec<u8>> {
        paths
            .iter()
            .map(|p| (p.clone(), std::fs::read(p).expect("read")))
            .collect()
    }

    fn on(&self) -> Outcome {
        self.run(&Action::On(vec!["--kill-after".into(), "5s".into()]))
    }

    fn off(&self) -> Outcome {
        self.run(&Action::Off)
    }

    fn run(&self, action: &Action) -> Outcome {
        let outcome = change(&self.settings, &Selection::default(), action, false);
        assert!(outcome.problems.is_empty(), "{:?}", outcome.problems);
        outcome
    }

    fn states(&self) -> BTreeMap<String, (State, Vec<String>)> {
        let (listed, problems) = status(&self.settings, &Selection::default());
        assert!(problems.is_empty(), "{problems:?}");
        listed
            .into_iter()
            .map(|l| (format!("{}/{}", l.host, l.name), (l.state, l.argv)))
            .collect()
    }
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

fn guarded(inner: &str) -> Vec<String> {
    words(&format!("{THIS} mcp wrap --kill-after 5s -- {inner}"))
}

#[test]
fn on_guards_every_stdio_entry_of_every_host_and_off_restores_every_byte() {
    let machine = Machine::new("guard-every-host");
    let files = machine.every_host();
    let before = Machine::snapshot(&files);
    let unguarded = machine.states();
    assert_eq!(unguarded.len(), 20, "{unguarded:#?}");

    let first = machine.on();
    let states = machine.states();
    for (name, inner) in [
        (
            "claude-code/everything",
            "npx -y @modelcontextprotocol/server-everything",
        ),
        ("claude-code/bare", "/usr/local/bin/bare-server"),
        ("claude-code/local-one", "node server.js --stdio"),
        ("claude-code/team", "uvx team-mcp"),
        (
            "claude-desktop/filesystem",
            "npx -y @modelcontextprotocol/server-filesystem /home/me/Documents",
        ),
        (
            "codex/fs",
            "npx -y @modelcontextprotocol/server-filesystem .",
        ),
        ("codex/noargs", "/opt/bin/noargs"),
        ("codex/inline", "python3 -m inline_server"),
        ("codex/dotted", "dotted-server"),
        ("gemini/py", "python3 -m my_server"),
        (
            "opencode/everything",
            "npx -y @modelcontextprotocol/server-everything",
        ),
        ("opencode/nested", "bun x nested-mcp"),
        ("cursor/a", "npx -y a-mcp"),
        ("cursor/b", "b-mcp"),
        (
            "vscode/memory",
            "npx -y @modelcontextprotocol/server-memory",
        ),
    ] {
        let (state, argv) = &states[name];
        assert_eq!(state.name(), "guarded", "{name}: {state:?}");
        assert_eq!(*argv, guarded(inner), "{name}");
    }
    for name in [
        "claude-code/remote",
        "codex/docs",
        "gemini/web",
        "opencode/context",
    ] {
        assert_eq!(states[name].0, State::Remote, "{name}");
    }
    assert_eq!(
        states["claude-desktop/proxied"].0,
        State::Wrapped("mcp-proxy".into())
    );
    assert!(first.files.iter().all(|w| w.backup.is_some()));

    // Everything else in each file stayed, byte for byte: only the
    // command and args values changed.
    let codex = std::fs::read_to_string(&files[3]).expect("codex");
    assert!(
        codex.starts_with(
            "# Codex settings\nmodel = \"o4-mini\"\n\n[mcp_servers.fs]\n# the file server\n"
        ),
        "{codex}"
    );
    assert!(
        codex.contains(&format!(
            "command = \"{THIS}\"   # runner\nargs = [\"mcp\", "
        )),
        "{codex}"
    );
    assert!(codex.contains(&format!("command = \"{THIS}\"\nargs = [\"mcp\", \"wrap\", \"--kill-after\", \"5s\", \"--\", \"/opt/bin/noargs\"]\ncwd")), "{codex}");
    let claude = std::fs::read_to_string(&files[0]).expect(".claude.json");
    assert!(
        claude.contains("\"args\": [\n        \"mcp\",\n        \"wrap\",\n"),
        "the new words laid out as the array's own: {claude}"
    );
    let dot_mcp = std::fs::read_to_string(&files[1]).expect(".mcp.json");
    assert_eq!(
        dot_mcp.matches('\n').count(),
        dot_mcp.matches("\r\n").count(),
        "CRLF kept: {dot_mcp:?}"
    );
    let opencode = std::fs::read_to_string(&files[5]).expect("opencode");
    assert!(
        opencode.contains("], // the demo\n") && opencode.contains("/* the newer shape */"),
        "{opencode}"
    );

    // On twice is on once.
    let after_first = Machine::snapshot(&files);
    let second = machine.on();
    assert!(second.files.is_empty(), "{:?}", second.files);
    assert_eq!(Machine::snapshot(&files), after_first);

    let off = machine.off();
    assert!(!off.files.is_empty());
    for (path, bytes) in &before {
        let now = std::fs::read(path).expect("read");
        assert_eq!(
            String::from_utf8_lossy(&now),
            String::from_utf8_lossy(bytes),
            "{} is not as it was",
            path.display()
        );
    }
    // Off twice is off once.
    assert!(machine.off().files.is_empty());
}

#[test]
fn off_without_records_rebuilds_each_entry_from_its_guard() {
    let machine = Machine::new("guard-no-records");
    let files = machine.every_host();
    let before = Machine::snapshot(&files);
    let unguarded = machine.states();
    machine.on();
    std::fs::remove_dir_all(machine.settings.records()).expect("records");
    machine.off();
    let states = machine.states();
    for (name, (state, argv)) in &unguarded {
        assert_eq!(states[name], (state.clone(), argv.clone()), "{name}");
    }
    // Where `on` only put words in front, taking them away is exact too;
    // an `args` that `on` added stays, empty.
    for (path, bytes) in &before {
        let now = std::fs::read_to_string(path).expect("read");
        let was = String::from_utf8_lossy(bytes);
        if path.ends_with(".claude.json") {
            assert_eq!(
                now,
                was.replace(
                    "\"command\": \"/usr/local/bin/bare-server\",",
                    "\"command\": \"/usr/local/bin/bare-server\",\n      \"args\": [],"
                )
            );
        } else if path.ends_with("config.toml") {
            let was = was.replace("noargs\"\n", "noargs\"\nargs = []\n");
            assert_eq!(
                now,
                was.replace("server\"\n", "server\"\ndotted.args = []\n")
            );
        } else {
            assert_eq!(now, was, "{}", path.display());
        }
    }
}

#[test]
fn a_guard_by_another_corral_is_left_by_on_and_taken_off_by_off() {
    let machine = Machine::new("guard-other");
    let old = r#"{"servers": {"old": {"type": "stdio", "command": "/gone/target/debug/corral", "args": ["mcp", "wrap", "--", "old-server", "-v"]}}}"#;
    let path = machine.write(machine.home().join(".config/Code/User/mcp.json"), old);
    let on = machine.on();
    assert!(on.files.is_empty());
    assert!(
        matches!(&on.entries[0].done, Done::Left(why) if why.contains("run off")),
        "{:?}",
        on.entries
    );
    let (state, _) = &machine.states()["vscode/old"];
    let State::OtherCorral(guard) = state else {
        panic!("{state:?}")
    };
    assert!(path_warning(&guard.corral).is_some_and(|w| w.contains("no longer exists")));
    machine.off();
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        r#"{"servers": {"old": {"type": "stdio", "command": "old-server", "args": ["-v"]}}}"#
    );
}

#[test]
fn a_guard_path_in_a_build_directory_is_warned_about() {
    let exe = std::env::current_exe().expect("exe");
    let exe = exe.to_string_lossy();
    assert!(
        path_warning(&exe).is_some_and(|w| w.contains("build directory")),
        "{exe}"
    );
    assert_eq!(path_warning("/bin/sh"), None);
    assert!(path_warning("corral").is_some());
}

#[test]
fn a_file_that_does_not_parse_is_reported_with_its_line_and_the_others_are_done() {
    let machine = Machine::new("guard-broken");
    let files = machine.every_host();
    let broken = machine.write(
        machine.project().join(".gemini/settings.json"),
        "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\",}\n    \"y\": 1\n  }\n}\n",
    );
    let original = std::fs::read(&broken).expect("read");
    let outcome = change(
        &machine.settings,
        &Selection::default(),
        &Action::On(Vec::new()),
        false,
    );
    assert_eq!(outcome.problems.len(), 1, "{:?}", outcome.problems);
    assert_eq!(outcome.problems[0].file, broken);
    assert!(
        outcome.problems[0].message.starts_with("line 4: "),
        "{:?}",
        outcome.problems
    );
    assert_eq!(std::fs::read(&broken).expect("read"), original);
    assert_eq!(
        outcome.files.len(),
        files.len() - 1,
        "every other file (but the empty one) changed"
    );
    let (_, problems) = status(&machine.settings, &Selection::default());
    assert_eq!(problems.len(), 1);
}

#[test]
fn selectors_pick_hosts_and_servers_and_a_dry_run_writes_nothing() {
    let machine = Machine::new("guard-select");
    let files = machine.every_host();
    let before = Machine::snapshot(&files);
    let selection = Selection {
        hosts: vec![hosts::host("cursor").expect("cursor")],
        servers: vec!["a".into()],
    };
    let dry = change(&machine.settings, &selection, &Action::On(Vec::new()), true);
    assert_eq!(dry.files.len(), 1);
    assert!(
        dry.files[0].after.contains(&format!(
            "\"command\":\"{THIS}\",\"args\":[\"mcp\",\"wrap\",\"--\",\"npx\",\"-y\",\"a-mcp\"]"
        )),
        "{}",
        dry.files[0].after
    );
    assert_eq!(
        Machine::snapshot(&files),
        before,
        "a dry run writes nothing"
    );
    let claude = change(
        &machine.settings,
        &Selection {
            hosts: vec![hosts::host("claude-code").expect("claude")],
            servers: Vec::new(),
        },
        &Action::On(Vec::new()),
        true,
    );
    let shown: String = claude
        .files
        .iter()
        .map(|w| format!("{}{}", w.shown.0, w.shown.1))
        .collect();
    assert!(
        !shown.contains("sk-secret-value") && shown.contains("\"API_KEY\": \"***\""),
        "{shown}"
    );
    let done = change(
        &machine.settings,
        &selection,
        &Action::On(Vec::new()),
        false,
    );
    assert_eq!(done.entries.len(), 1);
    let states = machine.states();
    assert_eq!(states["cursor/a"].0.name(), "guarded");
    assert_eq!(states["cursor/b"].0, State::Unguarded);
    assert_eq!(states["claude-code/everything"].0, State::Unguarded);
    // A wrapped entry named explicitly is guarded anyway.
    let proxied = Selection {
        hosts: Vec::new(),
        servers: vec!["proxied".into()],
    };
    change(&machine.settings, &proxied, &Action::On(Vec::new()), false);
    assert_eq!(
        machine.states()["claude-desktop/proxied"].0.name(),
        "guarded"
    );
}

#[test]
fn an_opencode_server_named_servers_is_an_entry_not_a_container() {
    let machine = Machine::new("guard-servers-name");
    let text = r#"{"mcp": {"servers": {"type": "local", "command": ["srv"]}, "other": 1}}"#;
    machine.write(machine.home().join(".config/opencode/opencode.json"), text);
    let states = machine.states();
    assert_eq!(states.len(), 1, "{states:?}");
    assert_eq!(states["opencode/servers"], (State::Unguarded, words("srv")));
}

#[test]
fn a_symlinked_config_is_changed_where_it_points_and_stays_a_link() {
    let machine = Machine::new("guard-symlink");
    let target = machine.write(machine.home().join("dotfiles/cursor-mcp.json"), CURSOR);
    let link = machine.home().join(".cursor/mcp.json");
    std::fs::create_dir_all(link.parent().expect("parent")).expect("dir");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    machine.on();
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    assert_eq!(machine.states()["cursor/a"].0.name(), "guarded");
    machine.off();
    assert_eq!(std::fs::read_to_string(&target).expect("read"), CURSOR);
}

#[test]
fn the_original_bytes_are_kept_before_the_first_change() {
    use std::os::unix::fs::PermissionsExt as _;
    let machine = Machine::new("guard-backup");
    let path = machine.write(machine.home().join(".cursor/mcp.json"), CURSOR);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let outcome = machine.on();
    let backup = outcome.files[0].backup.clone().expect("a backup");
    assert!(backup.starts_with(machine.settings.backups()));
    assert_eq!(std::fs::read_to_string(&backup).expect("backup"), CURSOR);
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode(&backup), 0o600);
    assert_eq!(mode(&path), 0o640, "the config keeps its mode");
}

/// Writes `counter` into the Cursor file as a host would: read, change its
/// own key, write a temporary file, rename it over. Returns what it wrote.
fn host_write(path: &Path, counter: u64) -> String {
    let text = std::fs::read_to_string(path).expect("read");
    let at = text.find("\"mcpServers\"").expect("servers");
    let rest = &text[at..];
    let text = format!("{{\"counter\":{counter},{rest}");
    let temp = path.with_extension(format!("host{counter}"));
    std::fs::write(&temp, &text).expect("write");
    std::fs::rename(&temp, path).expect("rename");
    text
}

fn counter_of(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("read");
    let value: serde_json::Value = serde_json::from_str(&text).expect("json");
    value["counter"].as_u64().unwrap_or(0)
}

#[test]
fn a_host_write_between_the_check_and_the_exchange_is_kept() {
    let machine = Machine::new("guard-window");
    let path = machine.write(machine.home().join(".cursor/mcp.json"), CURSOR);
    host_write(&path, 1);
    let hook_path = path.clone();
    let fired = Arc::new(AtomicBool::new(false));
    let once = fired.clone();
    file::BEFORE_EXCHANGE.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move || {
            if !once.swap(true, Ordering::SeqCst) {
                // The host's write lands in the window, from another thread.
                let path = hook_path.clone();
                std::thread::spawn(move || host_write(&path, 2))
                    .join()
                    .expect("host thread");
            }
        }));
    });
    machine.on();
    file::BEFORE_EXCHANGE.with(|hook| hook.borrow_mut().take());
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(counter_of(&path), 2, "the host's change is kept");
    assert_eq!(machine.states()["cursor/a"].0.name(), "guarded");
}

#[test]
fn without_the_exchange_a_host_write_before_the_check_is_kept() {
    let machine = Machine::new("guard-no-exchange");
    let path = machine.write(machine.home().join(".cursor/mcp.json"), CURSOR);
    host_write(&path, 1);
    let hook_path = path.clone();
    let fired = Arc::new(AtomicBool::new(false));
    let once = fired.clone();
    file::NO_EXCHANGE.with(|flag| flag.set(true));
    file::BEFORE_CHECK.with(|hook| {
        *hook.borrow_mut() = Some(Box::new(move || {
            if !once.swap(true, Ordering::SeqCst) {
                let path = hook_path.clone();
                std::thread::spawn(move || host_write(&path, 2))
                    .join()
                    .expect("host thread");
            }
        }));
    });
    machine.on();
    file::BEFORE_CHECK.with(|hook| hook.borrow_mut().take());
    file::NO_EXCHANGE.with(|flag| flag.set(false));
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(counter_of(&path), 2, "the host's change is kept");
    assert_eq!(machine.states()["cursor/a"].0.name(), "guarded");
}

/// A host that rewrites the Cursor file once in every attempt of
/// [`file::replace`], from another thread, until it has written `writes`
/// times: on odd attempts before the check, on even ones between the check
/// and the exchange (so every exchange displaces its write). No thread
/// races: it writes from the write's own steps (the hooks).
struct LoopingHost {
    last: Arc<std::sync::Mutex<(u64, String)>>,
}

impl LoopingHost {
    fn start(path: &Path, writes: u64) -> Self {
        let last = Arc::new(std::sync::Mutex::new((0, String::new())));
        let attempt = Arc::new(AtomicU64::new(0));
        let write = {
            let (path, last) = (path.to_path_buf(), last.clone());
            move || {
                let mut last = last.lock().expect("last");
                if last.0 < writes {
                    let (path, counter) = (path.clone(), last.0 + 1);
                    let text = std::thread::spawn(move || host_write(&path, counter))
                        .join()
                        .expect("host thread");
                    *last = (counter, text);
                }
            }
        };
        let before_check = {
            let (attempt, write) = (attempt.clone(), write.clone());
            move || {
                if attempt.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                    write();
                }
            }
        };
        let before_exchange = move || {
            if attempt.load(Ordering::SeqCst).is_multiple_of(2) {
                write();
            }
        };
        file::BEFORE_CHECK.with(|hook| *hook.borrow_mut() = Some(Box::new(before_check)));
        file::BEFORE_EXCHANGE.with(|hook| *hook.borrow_mut() = Some(Box::new(before_exchange)));
        Self { last }
    }

    /// How many times it wrote, and its last write.
    fn last(&self) -> (u64, String) {
        self.last.lock().expect("last").clone()
    }
}

impl Drop for LoopingHost {
    fn drop(&mut self) {
        file::BEFORE_CHECK.with(|hook| hook.borrow_mut().take());
        file::BEFORE_EXCHANGE.with(|hook| hook.borrow_mut().take());
    }
}

#[test]
fn a_host_rewriting_the_file_in_a_loop_never_loses_its_change() {
    let machine = Machine::new("guard-writer");
    let path = machine.write(machine.home().join(".cursor/mcp.json"), CURSOR);
    // More writes than corral makes attempts: it never finds the file still.
    let host = LoopingHost::start(&path, 1000);
    let outcome = change(
        &machine.settings,
        &Selection::default(),
        &Action::On(Vec::new()),
        false,
    );
    let (writes, text) = host.last();
    drop(host);
    assert!(
        matches!(&outcome.problems[..], [problem] if problem.file == path
            && problem.message.contains(&format!("changed {} times", file::ATTEMPTS))),
        "{:?}",
        outcome.problems
    );
    // Left as the host left it: its last write, every write before it kept
    // in turn (the host read the file before each).
    assert_eq!(std::fs::read_to_string(&path).expect("read"), text);
    assert!(writes > file::ATTEMPTS as u64, "{writes}");
    // Once the host stops, the change is made on its version.
    machine.on();
    assert_eq!(counter_of(&path), writes, "the host's change is kept");
    assert_eq!(machine.states()["cursor/a"].0.name(), "guarded");
}

#[test]
fn a_host_that_stops_rewriting_the_file_gets_the_change_made_on_its_last_write() {
    let machine = Machine::new("guard-writer-stops");
    let path = machine.write(machine.home().join(".cursor/mcp.json"), CURSOR);
    // Its last write is displaced by the exchange of the tenth attempt.
    let host = LoopingHost::start(&path, 10);
    machine.on();
    assert_eq!(host.last().0, 10);
    drop(host);
    assert_eq!(counter_of(&path), 10, "the host's change is kept");
    assert_eq!(machine.states()["cursor/a"].0.name(), "guarded");
}

#[test]
fn root_never_writes_a_file_or_directory_another_user_owns() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: needs root to chown a file to nobody");
        return;
    }
    let nobody = rustix::fs::Uid::from_raw(65534);
    let machine = Machine::new("guard-nobody");
    let files = machine.every_host();
    let theirs = &files[6]; // ~/.cursor/mcp.json
    rustix::fs::chown(theirs.as_path(), Some(nobody), None).expect("chown");
    let their_dir = machine.project().join(".vscode");
    rustix::fs::chown(their_dir.as_path(), Some(nobody), None).expect("chown");
    let outcome = change(
        &machine.settings,
        &Selection::default(),
        &Action::On(Vec::new()),
        false,
    );
    let mut refused: Vec<_> = outcome.problems.iter().map(|p| p.file.clone()).collect();
    refused.sort();
    let mut expected = vec![theirs.clone(), files[7].clone()];
    expected.sort();
    assert_eq!(refused, expected, "{:?}", outcome.problems);
    assert!(
        outcome
            .problems
            .iter()
            .all(|p| p.message.contains("nobody")),
        "{:?}",
        outcome.problems
    );
    assert_eq!(std::fs::read_to_string(theirs).expect("read"), CURSOR);
    assert_eq!(std::fs::read_to_string(&files[7]).expect("read"), VSCODE);
    assert_eq!(outcome.files.len(), files.len() - 3, "the others are done");
}
