//! The pid space and the bystander factory.

use std::{
    io::Write,
    path::Path,
    process::{Child, ChildStdin, Command as StdCommand, Stdio},
    time::{Duration, Instant},
};

use crate::{
    FACTORY_ARG, Failure, MAX_CYCLE, RESERVED_PIDS, Res, SMALL_PID_MAX, fail, note,
    procs::{Ident, Lines, kill_verified, wait_until},
};

/// Lowers `pid_max` inside the namespace; returns the length of the cycle
/// the factory may have to go through to reach a given pid.
pub(crate) fn small_pid_space() -> Res<i32> {
    const PATH: &str = "/proc/sys/kernel/pid_max";
    match std::fs::write(PATH, SMALL_PID_MAX.to_string()) {
        Ok(()) => {
            note(format!("pid_max = {SMALL_PID_MAX} in this namespace"));
            Ok(SMALL_PID_MAX - RESERVED_PIDS)
        }
        Err(error) => {
            let current: i32 = std::fs::read_to_string(PATH)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| format!("cannot read {PATH}"))?;
            if current > MAX_CYCLE {
                return Err(Failure::Skip(format!(
                    "cannot lower pid_max in this namespace ({error}; per-namespace pid_max \
                     needs Linux 6.14) and pid_max = {current}: a full pid cycle is too long"
                )));
            }
            note(format!(
                "cannot lower pid_max ({error}); cycling through all {current} pids instead"
            ));
            Ok(current - RESERVED_PIDS)
        }
    }
}

/// The bystander factory, seen from the scenario.
pub(crate) struct Factory {
    pub(crate) child: Child,
    pub(crate) input: Option<ChildStdin>,
    pub(crate) output: Lines,
    /// Forks allowed per hunt: two full cycles.
    pub(crate) tries: i32,
    pub(crate) bystanders: Vec<Ident>,
}

impl Factory {
    pub(crate) fn start(fixture: &Path, cycle: i32) -> Res<Self> {
        let here = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut child = StdCommand::new(here)
            .arg(FACTORY_ARG)
            .arg(fixture)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the bystander factory: {e}"))?;
        let input = child.stdin.take();
        let output = Lines::new(child.stdout.take().ok_or("factory stdout")?)?;
        Ok(Self {
            child,
            input,
            output,
            tries: cycle.saturating_mul(2).saturating_add(64),
            bystanders: Vec::new(),
        })
    }

    pub(crate) async fn ask(&mut self, request: &str) -> Res<Vec<String>> {
        let input = self.input.as_mut().ok_or("the factory's input is closed")?;
        writeln!(input, "{request}")
            .and_then(|()| input.flush())
            .map_err(|e| format!("asking the factory {request:?}: {e}"))?;
        let answer = self
            .output
            .line(Duration::from_secs(90), &format!("answer to {request:?}"))
            .await?;
        Ok(answer.split_whitespace().map(str::to_owned).collect())
    }

    /// Allocates pids until one above `RESERVED_PIDS` has been handed out,
    /// so every later pid (the tree's) is in the range that wraps.
    pub(crate) async fn burn(&mut self) -> Res<()> {
        let answer = self
            .ask(&format!("burn {} {}", RESERVED_PIDS + 1, self.tries))
            .await?;
        match answer.as_slice() {
            [word, pid] if word == "burned" => {
                note(format!("burnt pids up to {pid}"));
                Ok(())
            }
            _ => fail(format!("burning pids failed: {answer:?}")),
        }
    }

    /// Forks until a new process gets `target`'s pid and keeps that one
    /// running `fixture sleep 600` in a session of its own: the bystander.
    pub(crate) async fn hunt(&mut self, target: Ident) -> Res<Ident> {
        let started = Instant::now();
        let answer = self
            .ask(&format!("hunt {} {}", target.pid, self.tries))
            .await?;
        let bystander = match answer.as_slice() {
            [word, pid, start] if word == "bystander" => Ident {
                pid: pid.parse().map_err(|_| format!("bad answer {answer:?}"))?,
                start: start
                    .parse()
                    .map_err(|_| format!("bad answer {answer:?}"))?,
            },
            _ => {
                return fail(format!(
                    "pid {} of {target} could not be given to a bystander: the factory says {}",
                    target.pid,
                    answer.join(" ")
                ));
            }
        };
        self.bystanders.push(bystander);
        if bystander.pid != target.pid {
            return fail(format!("the factory landed on {bystander}, not {target}"));
        }
        if bystander.start == target.start {
            return fail(format!(
                "the bystander {bystander} has the start time of {target}: \
                 identities cannot tell them apart"
            ));
        }
        note(format!(
            "bystander {bystander} now holds the pid of {target} (hunt took {:?}); \
             pgid {}",
            started.elapsed(),
            bystander.stat().map_or(0, |s| s.pgid)
        ));
        Ok(bystander)
    }

    /// Kills the bystanders (by identity), closes the factory's input and
    /// waits for it to reap them and exit.
    pub(crate) async fn finish(mut self) {
        for bystander in &self.bystanders {
            kill_verified(*bystander);
        }
        drop(self.input.take());
        let child = &mut self.child;
        let exited = wait_until(Duration::from_secs(5), || {
            matches!(child.try_wait(), Ok(Some(_)) | Err(_))
        })
        .await;
        if !exited {
            note("the factory did not exit; leaving it to the end of the namespace");
        }
    }
}
