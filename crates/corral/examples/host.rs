//! A Rust agent host's tool calls, written the way a tokio user writes them
//! with `tokio::process::Command`: a `&mut` builder with a setting made under
//! a condition, `envs`, the leader's identity, a deadline, a cancel from the
//! host's own token, and the exit code of a call that ended by itself.
//!
//! Each call's command leaves something behind that signalling the child
//! would miss (a `setsid` daemon, a child that ignores `SIGTERM`); the
//! example checks that nothing of it survives, and exits non-zero otherwise.
//!
//! Run: `cargo run -p corral --example host` (`HOST_VERBOSE=1` prints each
//! signal as it is sent).

use std::{error::Error, time::Duration};

use corral::{Command, Outcome, Stdio, identity::Identity};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let verbose = std::env::var_os("HOST_VERBOSE").is_some();

    // 1. A deadline. The tool starts a daemon in a session of its own and
    //    says its pid; the call times out, and the daemon ends with it.
    let mut command = Command::new("sh");
    command
        .args(["-c", "(setsid sleep 1000 & echo $!); exec sleep 1000"])
        .envs([("TOOL_NAME", "search"), ("LC_ALL", "C")])
        .timeout(Duration::from_millis(500))
        .grace(Duration::from_millis(200));
    if verbose {
        command.on_signal(|signal| eprintln!("host: sending {signal:?} to the tree"));
    }
    let mut child = command.spawn()?;
    let leader = child.identity();
    println!(
        "deadline: leader {} (start time {})",
        leader.pid, leader.start_time
    );
    // The daemon's pid, read live from the captured output.
    let mut output = child.stdout_tap().ok_or("stdout is captured")?;
    output.wait_for(|bytes| bytes.contains(&b'\n')).await;
    let daemon = first_pid(&output.snapshot())?;
    let finished = child.wait().await?;
    println!(
        "deadline: {:?} after {:?}, daemon {} {}",
        finished.outcome,
        finished.report.run_time,
        daemon.pid,
        if alive(daemon) { "ALIVE" } else { "ended" },
    );
    check(finished.outcome == Outcome::TimedOut, "the call timed out")?;
    check(finished.report.survivors.is_empty(), "no survivors")?;
    check(!alive(daemon), "the setsid daemon ended with the call")?;
    check(!alive(leader), "the leader ended")?;

    // 2. A cancel. The tool ignores SIGTERM; the host waits for it beside
    //    its own stop button (`wait` is cancel safe), presses it once the
    //    tool is ready, and the tree is ended with SIGKILL after the grace.
    let stop = CancellationToken::new();
    let mut command = Command::new("sh");
    command
        .args(["-c", "trap '' TERM; echo ready; sleep 1000"])
        .stdout(Stdio::Piped)
        .cancel_on(stop.clone())
        .grace(Duration::from_millis(200));
    let mut child = command.spawn()?;
    let mut lines = BufReader::new(child.take_stdout().ok_or("stdout is piped")?).lines();
    let finished = loop {
        tokio::select! {
            finished = child.wait() => break finished?,
            line = lines.next_line() => {
                if line?.as_deref() == Some("ready") {
                    stop.cancel();
                }
            }
        }
    };
    println!(
        "cancel: {:?}, escalated to SIGKILL: {}",
        finished.outcome, finished.report.escalated
    );
    check(
        finished.outcome == Outcome::Cancelled,
        "the call was cancelled",
    )?;
    check(
        finished.report.escalated,
        "the TERM-ignoring tool got SIGKILL",
    )?;
    check(finished.report.survivors.is_empty(), "no survivors")?;
    check(
        finished.outcome.effects_unknown(),
        "a cancelled call's effects are unknown",
    )?;

    // 3. A call that ends by itself: its exit code, as `ExitStatus::code`.
    let finished = Command::new("sh").args(["-c", "exit 3"]).run().await?;
    println!("exit: code {:?}", finished.outcome.code());
    check(!finished.outcome.success(), "exit 3 is not a success")?;
    check(finished.outcome.code() == Some(3), "the exit code is 3")?;

    println!("host: every call ended whole");
    Ok(())
}

/// The first line of `bytes` as a pid, with the start time it has now.
fn first_pid(bytes: &[u8]) -> Result<Identity, Box<dyn Error>> {
    let text = String::from_utf8_lossy(bytes);
    let pid: i32 = text
        .lines()
        .next()
        .ok_or("no pid printed")?
        .trim()
        .parse()?;
    let start_time = start_time(pid).ok_or("the daemon ended before the deadline")?;
    Ok(Identity { pid, start_time })
}

/// Whether the process `who` names still runs (a reused pid is another
/// process: its start time differs).
fn alive(who: Identity) -> bool {
    start_time(who.pid) == Some(who.start_time)
}

/// Field 22 of `/proc/PID/stat`, if the process exists and runs (a zombie
/// has ended; its new parent reaps it).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    let mut fields = after_name.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

fn check(holds: bool, what: &str) -> Result<(), Box<dyn Error>> {
    if holds {
        Ok(())
    } else {
        Err(format!("not so: {what}").into())
    }
}
