//! Long runs as MCP tasks across processes: the real `corral` binary as the
//! server (`corral mcp serve --http`) and as the client (`corral mcp call
//! --task`, `corral mcp task get|cancel`). A task outlives its client's
//! process (killed with `SIGKILL`): a new process with the same token reads
//! the completed result with its whole output. A task does not outlive its
//! server's: with the server killed, the run's tree is gone and the task is
//! unknown to the server started again. Processes are checked and signalled
//! by identity (pid and start time), only those the test started.

mod mcp_common;

use std::{
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, ExitStatus, Output, Stdio},
    time::{Duration, Instant},
};

use corral_tests::{Guard, Lines, Owned, Proc, Scratch, wait_until};
use mcp_common::{HttpServer, wrapper};
use serde_json::{Value, json};

/// How long a start, a client or a wait may take.
const LIMIT: Duration = Duration::from_secs(60);

/// A listening `corral mcp serve --http 127.0.0.1:0` whose runs become
/// tasks after 300 ms, with the token in `token_file`.
fn serve(token_file: &Path) -> HttpServer {
    let token_file = token_file.to_str().expect("a UTF-8 path");
    HttpServer::start(&["--task-window", "300ms", "--token-file", token_file])
}

/// A token file as `--token-file` wants it (owner-only).
fn token_file(scratch: &Scratch, token: &str) -> std::path::PathBuf {
    let file = scratch.path("token");
    std::fs::write(&file, format!("{token}\n")).expect("write the token");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    file
}

/// `corral mcp ARGS --url URL --header 'Authorization: Bearer TOKEN'`.
fn client(args: &[&str], url: &str, token: &str) -> Command {
    let mut command = Command::new(wrapper());
    command
        .arg("mcp")
        .args(args)
        .args(["--url", url, "--header"])
        .arg(format!("Authorization: Bearer {token}"))
        .stdin(Stdio::null());
    command
}

/// Runs `command` to its end within [`LIMIT`].
fn output(mut command: Command) -> Output {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting corral");
    let mut guard = Guard::new(child);
    guard
        .wait_exit(LIMIT)
        .unwrap_or_else(|| panic!("corral did not end within {LIMIT:?}"));
    let child = guard.child();
    let mut out = Vec::new();
    let mut err = Vec::new();
    use std::io::Read as _;
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_end(&mut out);
    }
    if let Some(mut stderr) = child.stderr.take() {
        let _ = stderr.read_to_end(&mut err);
    }
    let status = child.wait().expect("status");
    Output {
        status,
        stdout: out,
        stderr: err,
    }
}

/// `corral mcp call --task` of `shell` started in the background: the
/// process, and the task id it said on standard error.
fn call_in_background(url: &str, token: &str, shell: &str) -> (Owned, Lines, String) {
    let arguments = json!({"shell": shell, "timeout": "120s"}).to_string();
    let mut child = Owned(
        client(&["call", "--task", "--timeout", "120s"], url, token)
            .args(["run", &arguments])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting corral mcp call --task"),
    );
    let stderr = Lines::new(child.stderr.take().expect("stderr"));
    let id = loop {
        let line = stderr
            .next(LIMIT)
            .unwrap_or_else(|| panic!("corral mcp call --task never said its task"));
        if let Some(rest) = line.strip_prefix("corral: tool run runs as task ") {
            break rest.split(';').next().expect("an id").to_owned();
        }
    };
    (child, stderr, id)
}

/// SIGKILL to `child` (a process this test started), then reaped.
fn kill(child: &mut Owned) -> ExitStatus {
    let proc = Proc::of(child.id() as i32).expect("still running");
    assert!(proc.kill(), "SIGKILL to our child");
    child.wait().expect("reaped")
}

/// The identity of the process whose `$$` and start time `file` holds.
fn identity(file: &Path) -> Proc {
    let mut text = String::new();
    wait_until(LIMIT, || {
        text = std::fs::read_to_string(file).unwrap_or_default();
        !text.is_empty()
    });
    let mut fields = text.split_whitespace();
    let pid = fields.next().and_then(|p| p.parse().ok());
    let start_time = fields.next().and_then(|s| s.parse().ok());
    match (pid, start_time) {
        (Some(pid), Some(start_time)) => Proc { pid, start_time },
        _ => panic!("not an identity line: {text:?}"),
    }
}

fn record_identity(file: &Path) -> String {
    let file = file.display();
    format!("echo $$ $(cut -d' ' -f22 /proc/$$/stat) > {file}.tmp && mv {file}.tmp {file}")
}

/// Survival: `corral mcp call --task` starts a 20-second run and is killed;
/// a new process with the same token gets the completed result, with the
/// whole output, through `corral mcp task get`.
#[test]
fn a_task_outlives_its_killed_client_and_a_new_process_reads_the_whole_result() {
    let scratch = Scratch::new("mcp-task-survives-client");
    let token = "survival-token-0123456789";
    let server = serve(&token_file(&scratch, token));
    let shell = "echo first-line; sleep 20; echo last-line";
    let (mut call, _stderr, id) = call_in_background(&server.url, token, shell);
    assert!(id.starts_with("task-"), "{id}");
    kill(&mut call);

    // Read while it runs: still working (124), and says so.
    let early = output({
        let mut command = client(&["task", "get", "--json"], &server.url, token);
        command.arg(&id);
        command
    });
    let envelope: Value = serde_json::from_slice(&early.stdout).expect("the envelope");
    assert_eq!(early.status.code(), Some(124), "{envelope:#}");
    assert_eq!(envelope["task_status"], "working", "{envelope:#}");
    assert_eq!(envelope["task_id"], id.as_str(), "{envelope:#}");

    let started = Instant::now();
    let done = loop {
        let mut command = client(&["task", "get", "--json"], &server.url, token);
        command.arg(&id);
        let read = output(command);
        if read.status.code() != Some(124) {
            break read;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still working after 60 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let envelope: Value = serde_json::from_slice(&done.stdout).expect("the envelope");
    assert_eq!(done.status.code(), Some(0), "{envelope:#}");
    assert_eq!(envelope["task_status"], "completed", "{envelope:#}");
    let result = &envelope["result"]["structuredContent"];
    assert_eq!(result["outcome"], "exited", "{envelope:#}");
    assert_eq!(result["stdout"], "first-line\nlast-line\n", "{envelope:#}");
}

/// A task does not outlive its server: with the server killed (SIGKILL),
/// the run's tree is gone (the watchdog), the client that followed it ends
/// saying the task cannot be found again, and the server started again
/// with the same token does not know it.
#[test]
fn with_the_server_killed_the_tree_is_gone_and_the_task_is_unknown() {
    let scratch = Scratch::new("mcp-task-server-killed");
    let token = "server-killed-token-0123456789";
    let tokens = token_file(&scratch, token);
    let mut server = serve(&tokens);
    let member = scratch.path("member");
    let shell = format!("{}; echo first-line; sleep 60", record_identity(&member));
    let (mut call, stderr, id) = call_in_background(&server.url, token, &shell);
    let run = identity(&member);
    let _cleanup = Guard::of([run]);
    assert!(run.is_alive(), "the run started");

    let leader = Proc::of(server.child.id() as i32).expect("the server runs");
    assert!(leader.kill(), "SIGKILL to our server");
    server.child.wait().expect("the server reaped");
    assert!(
        wait_until(Duration::from_secs(30), || !run.is_alive()),
        "the run outlived its server: {}",
        run.describe()
    );

    // The client that followed the task gives it up as lost.
    let mut status = None;
    wait_until(LIMIT, || {
        status = call.try_wait().expect("try_wait");
        status.is_some()
    });
    let status = status.unwrap_or_else(|| panic!("the client still polls after {LIMIT:?}"));
    assert_eq!(status.code(), Some(124), "effects unknown");
    let said: Vec<String> = std::iter::from_fn(|| stderr.next(Duration::from_secs(1))).collect();
    let said = said.join("\n");
    assert!(said.contains("cannot be found again"), "{said}");

    // Started again with the same token: the task is unknown.
    let again = serve(&tokens);
    let read = output({
        let mut command = client(&["task", "get"], &again.url, token);
        command.arg(&id);
        command
    });
    let stderr = String::from_utf8_lossy(&read.stderr);
    assert_eq!(read.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("unknown task"), "{stderr}");
}

/// Bad input is refused before anything is sent, naming the fix.
#[test]
fn a_bad_task_id_is_refused_naming_the_fix() {
    for bad in ["", "has space", "tab\tbad"] {
        let read = output({
            let mut command = Command::new(wrapper());
            command.args(["mcp", "task", "get", "--url", "http://127.0.0.1:9/mcp", bad]);
            command
        });
        let stderr = String::from_utf8_lossy(&read.stderr);
        assert_eq!(read.status.code(), Some(125), "{bad:?}: {stderr}");
        assert!(
            stderr.contains("give the id `corral mcp call --task` printed"),
            "{bad:?}: {stderr}"
        );
    }
}
