//! `corral mcp guard status|on|off` as a user runs it: a scratch `HOME`
//! with host configs, the binary's output, exit statuses and the files
//! after. The formats themselves are tested in corral-mcp's `guard` unit
//! tests; the real hosts in `mcp_hosts`.

mod common;

use std::{
    io::Write as _,
    path::PathBuf,
    process::{Command, Output, Stdio},
};

use common::corral_path;
use corral_tests::Scratch;
use serde_json::Value;

const CURSOR: &str = "{\n  \"mcpServers\": {\n    \"echo\": {\n      \"command\": \"cat\",\n      \"env\": { \"API_TOKEN\": \"tok-do-not-print\" }\n    },\n    \"web\": { \"url\": \"https://example.invalid/mcp\" }\n  }\n}\n";

const CODEX: &str = "# mine\n[mcp_servers.files]\ncommand = \"npx\" # runner\nargs = [\"-y\", \"@modelcontextprotocol/server-filesystem\", \".\"]\n\n[mcp_servers.files.env]\nTOKEN = \"tok-do-not-print\"\n";

struct Home {
    scratch: Scratch,
}

impl Home {
    fn new(name: &str) -> Self {
        let scratch = Scratch::new(name);
        std::fs::create_dir_all(scratch.path("project")).expect("project");
        Self { scratch }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.scratch.path("home").join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(&path, text).expect("write");
        path
    }

    /// `corral mcp guard ARGS` with this `HOME`, in the project directory.
    fn guard(&self, args: &[&str]) -> Output {
        let mut command = Command::new(corral_path());
        command
            .args(["mcp", "guard"])
            .args(args)
            .current_dir(self.scratch.path("project"))
            .env("HOME", self.scratch.path("home"));
        for var in [
            "XDG_CONFIG_HOME",
            "XDG_STATE_HOME",
            "CODEX_HOME",
            "CLAUDE_CONFIG_DIR",
        ] {
            command.env_remove(var);
        }
        command.output().expect("run corral mcp guard")
    }
}

fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn status_json(home: &Home) -> Value {
    let output = home.guard(&["status", "--json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    serde_json::from_slice(&output.stdout).expect("status --json")
}

#[test]
fn on_then_off_leaves_every_file_as_it_was_and_never_prints_a_secret() {
    let home = Home::new("cli-guard-roundtrip");
    let cursor = home.write(".cursor/mcp.json", CURSOR);
    let codex = home.write(".codex/config.toml", CODEX);

    let status = status_json(&home);
    assert_eq!(status["version"], 1);
    // The document's shape is pinned: a change is a new version.
    let keys = |value: &Value| -> Vec<String> {
        let mut keys: Vec<String> = value
            .as_object()
            .expect("an object")
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(
        keys(&status),
        [
            "backups",
            "corral",
            "corral_warning",
            "entries",
            "ledger",
            "problems",
            "project",
            "version"
        ]
    );
    assert_eq!(keys(&status["ledger"]), ["cleared_environment", "here"]);
    assert_eq!(
        keys(&status["entries"][0]),
        [
            "command", "cwd", "env", "file", "guard", "host", "invalid", "name", "scope", "state",
            "wrapper"
        ]
    );
    let states: Vec<(String, String)> = status["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or("").to_owned(),
                e["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("files", "unguarded"),
            ("echo", "unguarded"),
            ("web", "remote")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(
        status["entries"][1]["env"],
        serde_json::json!(["API_TOKEN"])
    );

    let dry = home.guard(&["on", "--dry-run", "--", "--kill-after", "3s"]);
    assert_eq!(dry.status.code(), Some(0), "{}", text(&dry));
    let shown = text(&dry);
    assert!(
        shown.contains(&format!("+++ {}", cursor.display())),
        "{shown}"
    );
    assert!(shown.contains("would guard cursor user echo"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(&cursor).expect("read"),
        CURSOR,
        "a dry run writes nothing"
    );

    let on = home.guard(&["on", "--", "--kill-after", "3s"]);
    assert_eq!(on.status.code(), Some(0), "{}", text(&on));
    let mut printed = text(&on) + &text(&dry);
    assert!(
        printed.contains("wrote ") && printed.contains("its original bytes: "),
        "{printed}"
    );
    let status = status_json(&home);
    let corral = corral_path().canonicalize().expect("corral path");
    let echo = &status["entries"][1];
    assert_eq!(echo["state"], "guarded");
    assert_eq!(echo["guard"]["corral"], corral.to_string_lossy().as_ref());
    assert_eq!(
        echo["guard"]["options"],
        serde_json::json!(["--kill-after", "3s"])
    );
    assert_eq!(echo["guard"]["server"], serde_json::json!(["cat"]));
    assert!(
        echo["guard"]["warning"]
            .as_str()
            .is_some_and(|w| w.contains("build directory"))
    );

    let again = home.guard(&["on", "--", "--kill-after", "3s"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    assert!(
        !text(&again).contains("wrote "),
        "on twice is on once: {}",
        text(&again)
    );

    let human = home.guard(&["status"]);
    let off = home.guard(&["off"]);
    assert_eq!(off.status.code(), Some(0), "{}", text(&off));
    assert_eq!(std::fs::read_to_string(&cursor).expect("read"), CURSOR);
    assert_eq!(std::fs::read_to_string(&codex).expect("read"), CODEX);
    printed += &(text(&human) + &text(&off) + &serde_json::to_string(&status).expect("json"));
    assert!(
        !printed.contains("tok-do-not-print"),
        "a secret was printed:\n{printed}"
    );
}

#[test]
fn a_broken_file_is_named_with_its_line_and_the_others_are_still_guarded() {
    let home = Home::new("cli-guard-broken");
    let cursor = home.write(".cursor/mcp.json", CURSOR);
    let broken = home.write(
        ".gemini/settings.json",
        "{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"x\"\n  }\n",
    );
    let on = home.guard(&["on"]);
    assert_eq!(on.status.code(), Some(1), "{}", text(&on));
    let stderr = String::from_utf8_lossy(&on.stderr);
    assert!(
        stderr.contains(&format!("{}: line ", broken.display())),
        "{stderr}"
    );
    assert_ne!(
        std::fs::read_to_string(&cursor).expect("read"),
        CURSOR,
        "the other file was done"
    );
    let status = home.guard(&["status", "--json"]);
    assert_eq!(status.status.code(), Some(1), "{}", text(&status));
    let json: Value = serde_json::from_slice(&status.stdout).expect("json");
    assert_eq!(
        json["problems"][0]["file"],
        broken.to_string_lossy().as_ref()
    );
}

#[test]
fn bad_selectors_and_options_name_the_fix() {
    let home = Home::new("cli-guard-errors");
    home.write(".cursor/mcp.json", CURSOR);
    let unknown = home.guard(&["on", "--server", "nope"]);
    assert_eq!(unknown.status.code(), Some(1), "{}", text(&unknown));
    assert!(
        text(&unknown).contains("no entry named nope"),
        "{}",
        text(&unknown)
    );
    let options = home.guard(&["on", "--", "--kill-afterr", "1s"]);
    assert_eq!(options.status.code(), Some(125), "{}", text(&options));
    assert!(
        text(&options).contains("corral mcp wrap --help"),
        "{}",
        text(&options)
    );
    let host = home.guard(&["status", "--host", "emacs"]);
    assert_eq!(host.status.code(), Some(125), "{}", text(&host));
    assert!(text(&host).contains("claude-code"), "{}", text(&host));
    let no_home = Command::new(corral_path())
        .args(["mcp", "guard", "status"])
        .env_remove("HOME")
        .output()
        .expect("run");
    assert_eq!(no_home.status.code(), Some(125), "{}", text(&no_home));
    assert!(
        text(&no_home).contains("set it to the home directory"),
        "{}",
        text(&no_home)
    );
}

/// Codex starts servers with a cleared environment: the guarded command
/// line must work with no `HOME`, `PATH` or `XDG_RUNTIME_DIR`.
#[test]
fn a_guarded_command_line_works_in_a_cleared_environment() {
    let home = Home::new("cli-guard-env-i");
    home.write(".cursor/mcp.json", CURSOR);
    let on = home.guard(&["on"]);
    assert_eq!(on.status.code(), Some(0), "{}", text(&on));
    let status = status_json(&home);
    let argv: Vec<String> =
        serde_json::from_value(status["entries"][0]["command"].clone()).expect("argv");
    assert_eq!(argv[1..], ["mcp", "wrap", "--", "cat"]);
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the guarded server");
    let frame = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(frame.as_bytes())
        .expect("write");
    let output = child.wait_with_output().expect("wait");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        frame,
        "{}",
        text(&output)
    );
}
