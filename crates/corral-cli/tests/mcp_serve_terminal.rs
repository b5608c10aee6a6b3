//! What a `corral mcp serve` run inherits from the server: neither its
//! controlling terminal (a run, perhaps as another user, could read it or
//! push input into it with `TIOCSTI`, which the operator's shell would then
//! run) nor the descriptors the server's parent left open.

mod common;

use std::process::Stdio;

use common::{corral, corral_path};

/// Starts its arguments as a server in a session of its own whose
/// controlling terminal is a fresh pty (the operator's terminal, in the
/// test), with descriptor 9 open on a private file (what a parent leaves
/// open): forks first, so that `setsid` is allowed whatever group corral
/// put it in, and waits for the server with its standard streams passed on.
const WITH_A_TERMINAL: &str = r#"
import fcntl, os, sys, termios
pid = os.fork()
if pid:
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
master, slave = os.openpty()
os.setsid()
fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
os.close(slave)
# Kept open (inherited): closing the master would hang the terminal up.
os.set_inheritable(master, True)
private = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.dup2(private, 9)
os.execv(sys.argv[2], sys.argv[2:])
"#;

#[test]
fn a_run_gets_neither_the_servers_terminal_nor_its_inherited_descriptors() {
    let scratch = corral_tests::Scratch::new("serve-terminal");
    let private = scratch.0.join("private.log");
    let corral_bin = corral_path();
    let root = scratch.0.to_string_lossy().into_owned();
    let output = corral()
        .args(["mcp", "call", "--json", "--timeout", "30s", "run"])
        .arg(
            r#"{"shell": "if test -e /proc/self/fd/9; then echo fd9-inherited; else echo fd9-closed; fi; if (exec 3<>/dev/tty) 2>/dev/null; then echo tty-reached; else echo no-tty; fi"}"#,
        )
        .args(["--", "python3", "-c", WITH_A_TERMINAL])
        .arg(&private)
        .arg(&corral_bin)
        .args(["mcp", "serve", "--root", &root])
        .stdin(Stdio::null())
        .output()
        .expect("run corral mcp call");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let envelope: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("a JSON envelope");
    let result = &envelope["result"]["structuredContent"];
    assert_eq!(
        result["stdout"], "fd9-closed\nno-tty\n",
        "{envelope:#}\n{stderr}"
    );
}
