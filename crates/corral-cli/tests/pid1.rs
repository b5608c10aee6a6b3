//! `corral run` as its PID namespace's init (a container's entrypoint), each
//! duty in a real namespace (`unshare --pid --fork --mount-proc`): it reaps
//! every orphan of the namespace, passes `docker stop`'s and `docker kill`'s
//! signals on to the command and exits with its status, and ends what is
//! left in the namespace when the command's tree has ended, saying what it
//! was. Then the same scenarios side by side with `tini` and `dumb-init`,
//! as `docs/pid1.md`'s table (rewritten with `UPDATE_GOLDEN=1`).

mod common;

use std::{
    fmt::Write as _,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{corral_path, private_ledger, shell_status};
use corral_tests::{Guard, Lines, Proc, Scratch};
use rustix::process::Signal;

const UNSHARE: &str = "/usr/bin/unshare";
const NSENTER: &str = "/usr/bin/nsenter";
const TINI: &str = "/usr/bin/tini";
const DUMB_INIT: &str = "/usr/bin/dumb-init";

/// The environment marker every process of a run inherits.
const MARK: &str = "CORRAL_PID1_TEST";

/// How long a run may take to answer at all.
const LIMIT: Duration = Duration::from_secs(10);

/// The signals an init passes on, as `docker stop` and `docker kill` send
/// them, with their numbers.
const SIGNALS: [(&str, Signal); 7] = [
    ("TERM", Signal::TERM),
    ("INT", Signal::INT),
    ("HUP", Signal::HUP),
    ("QUIT", Signal::QUIT),
    ("USR1", Signal::USR1),
    ("USR2", Signal::USR2),
    ("WINCH", Signal::WINCH),
];

/// The inits compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pid1 {
    Corral,
    /// corral started as `timeout 60`.
    CorralTimeout,
    Tini,
    DumbInit,
}

impl Pid1 {
    fn name(self) -> &'static str {
        match self {
            Self::Corral => "corral run",
            Self::CorralTimeout => "corral as timeout",
            Self::Tini => "tini 0.19",
            Self::DumbInit => "dumb-init 1.2",
        }
    }

    /// The init's command line before the command's, or `None` (with
    /// `SKIPPED:`) where it is not installed.
    fn argv(self) -> Option<Vec<PathBuf>> {
        let path = match self {
            Self::Corral => return Some(vec![corral_path(), "run".into(), "--".into()]),
            Self::CorralTimeout => {
                // Only argv[0] counts: a symlink named `timeout`.
                let dir = corral_tests::scratch("pid1-timeout");
                let link = dir.join("timeout");
                let _ = std::fs::create_dir_all(&dir);
                if !link.exists() {
                    std::os::unix::fs::symlink(corral_path(), &link).expect("symlink");
                }
                return Some(vec![link, "60".into()]);
            }
            Self::Tini => TINI,
            Self::DumbInit => DUMB_INIT,
        };
        if !Path::new(path).exists() {
            corral_tests::skipped(format!("{path} is not installed (Debian: tini, dumb-init)"));
            return None;
        }
        Some(match self {
            Self::Tini => vec![path.into(), "--".into()],
            _ => vec![path.into()],
        })
    }
}

/// Whether this test can make PID namespaces, or `SKIPPED:` and why not.
fn namespaces() -> bool {
    if !corral_tests::is_root() {
        corral_tests::skipped("a new PID namespace (unshare --pid) needs root");
        return false;
    }
    for tool in [UNSHARE, NSENTER] {
        if !Path::new(tool).exists() {
            corral_tests::skipped(format!("{tool} is not installed (util-linux)"));
            return false;
        }
    }
    true
}

/// One init running `script` (`sh -c`) as PID 1 of a new PID namespace
/// with its own `/proc`.
struct Run {
    guard: Guard,
    lines: Lines<String>,
    errors: Lines<String>,
    /// The init, as the host numbers it.
    init: Proc,
    mark: String,
}

impl Run {
    /// Starts `init` on `script` and waits for its `ready` line. `None` if
    /// the init is not installed.
    fn start(init: Pid1, script: &str, scratch: &Scratch, name: &str) -> Option<Self> {
        Self::start_with(&[], init, script, scratch, name)
    }

    fn start_with(
        prefix: &[&str],
        init: Pid1,
        script: &str,
        scratch: &Scratch,
        name: &str,
    ) -> Option<Self> {
        let argv = init.argv()?;
        let mark = format!("{name}-{}", std::process::id());
        let mut command = match prefix.split_first() {
            Some((first, rest)) => {
                let mut command = Command::new(first);
                command.args(rest).arg(UNSHARE);
                command
            }
            None => Command::new(UNSHARE),
        };
        private_ledger(&mut command, &format!("pid1-{name}"));
        let mut child = command
            .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
            .args(&argv)
            .args(["sh", "-c", script])
            .env(MARK, &mark)
            .env("D", scratch.path(""))
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let lines = Lines::new(child.stdout.take().expect("stdout"));
        let errors = Lines::new(child.stderr.take().expect("stderr"));
        let unshare = child.id() as i32;
        let guard = Guard::new(child);
        let ready = lines.next(LIMIT);
        let said: Vec<String> = std::iter::from_fn(|| errors.next(Duration::ZERO)).collect();
        assert_eq!(
            ready.as_deref(),
            Some("ready"),
            "{}: {said:#?}",
            init.name()
        );
        let init_pid = *children(unshare)
            .first()
            .expect("unshare's child, the init");
        Some(Self {
            guard,
            lines,
            errors,
            init: Proc::of(init_pid).expect("the init"),
            mark,
        })
    }

    /// Writes a line to the command's standard input (its cue to go on).
    fn cue(&mut self) {
        let stdin = self.guard.child().stdin.as_mut().expect("stdin");
        stdin.write_all(b"go\n").expect("write the cue");
        stdin.flush().expect("flush the cue");
    }

    /// Waits for the namespace to end: the init's status as a shell reports
    /// it, and what the init said on standard error.
    fn end(mut self) -> (i32, Vec<String>, String) {
        let status = exit_of(&mut self.guard).expect("the namespace ends");
        let said: Vec<String> =
            std::iter::from_fn(|| self.errors.next(Duration::from_secs(1))).collect();
        (shell_status(status), said, self.mark)
    }
}

/// The guarded child's exit, waited for on a thread of its own (the moment
/// it exits, not at the next poll), at most [`LIMIT`]; the guard still
/// kills it by identity if it does not exit.
fn exit_of(guard: &mut Guard) -> Option<std::process::ExitStatus> {
    let mut child = guard.child.take().expect("the guarded child");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait());
    });
    receiver.recv_timeout(LIMIT).ok()?.ok()
}

/// The children of `pid` (every thread's).
fn children(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let listed = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(
            listed
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok()),
        );
    }
    found
}

/// The state letter and command line of `pid`.
fn state(pid: i32) -> Option<(char, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let letter = stat.rsplit_once(") ")?.1.chars().next()?;
    let line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some((letter, String::from_utf8_lossy(&line).replace('\0', " ")))
}

/// Eight orphans (`(sleep 0.05 &)`: each subshell exits at once, its
/// `sleep` re-parents to the init), then the command waits for its cue.
const ORPHANS: &str =
    "for i in 1 2 3 4 5 6 7 8; do (sleep 0.05 &); done; echo ready; read cue; exit 0";

/// How many of the eight orphans are zombies once they have all exited and
/// the init has had 2 s to reap them.
fn zombies(init: Pid1, scratch: &Scratch) -> Option<usize> {
    let mut run = Run::start(init, ORPHANS, scratch, "zombies")?;
    let pid = run.init.pid;
    let sleeping = || {
        children(pid)
            .into_iter()
            .filter_map(state)
            .any(|(s, line)| s != 'Z' && line.starts_with("sleep 0.05"))
    };
    assert!(
        corral_tests::wait_until(LIMIT, || !sleeping()),
        "the orphans still sleep"
    );
    let count = || {
        children(pid)
            .into_iter()
            .filter_map(state)
            .filter(|(s, _)| *s == 'Z')
            .count()
    };
    corral_tests::wait_until(Duration::from_secs(2), || count() == 0);
    let left = count();
    run.cue();
    let (status, said, _) = run.end();
    assert_eq!(status, 0, "{}: {said:#?}", init.name());
    Some(left)
}

/// What became of one signal sent to the init.
#[derive(Debug, Clone, Copy)]
struct Passed {
    /// The command's trap ran.
    recorded: bool,
    /// The init's exit status.
    status: i32,
    /// From the signal to the init's exit.
    took: Duration,
}

/// Sends `signal` to the init of a command that traps it (and exits 3).
/// The command waits with `wait`, which a trapped signal interrupts at
/// once, so the time measured is the init's.
fn pass(init: Pid1, name: &str, signal: Signal, scratch: &Scratch) -> Option<Passed> {
    let script = format!(
        "trap 'echo got {name}; exit 3' {name}; echo ready; while :; do sleep 1 & wait $!; done"
    );
    let run = Run::start(init, &script, scratch, &format!("signal-{name}"))?;
    let sent = Instant::now();
    assert!(
        run.init.signal(signal),
        "the init is gone before the signal"
    );
    let recorded =
        run.lines.next(Duration::from_secs(3)).as_deref() == Some(&*format!("got {name}"));
    let mut run = run;
    if !recorded {
        // The init dropped it: the run ends by the guard's SIGKILL.
        run.guard.kill_running();
    }
    let status = exit_of(&mut run.guard).expect("the namespace ends");
    let took = sent.elapsed();
    Some(Passed {
        recorded,
        status: shell_status(status),
        took,
    })
}

/// The init's status when `SIGTERM` kills the command (`exec sleep`).
fn killed_status(init: Pid1, scratch: &Scratch) -> Option<i32> {
    let run = Run::start(init, "echo ready; exec sleep 1000", scratch, "killed")?;
    assert!(run.init.signal(Signal::TERM));
    Some(run.end().0)
}

/// A helper that records its end on `SIGTERM` in `$D/ended`, having said
/// it started in `$D/$1`: written to `$D/helper` by [`helper`].
const HELPER: &str = "trap 'echo ended >> \"$D/ended\"; exit 0' TERM
echo started >> \"$D/$1\"
while :; do sleep 0.02; done
";

/// Writes [`HELPER`] into the scratch directory.
fn helper(scratch: &Scratch) {
    std::fs::write(scratch.path("helper"), HELPER).expect("write the helper");
}

/// What an init did with what the command left.
#[derive(Debug, Clone)]
struct Ended {
    /// Helpers whose `SIGTERM` trap ran before the namespace ended.
    gracefully: usize,
    /// Helpers started.
    started: usize,
    /// Processes of the run still running once the init had exited
    /// (the marker in the environment, `/proc` scanned).
    left: usize,
    /// The init named them on standard error.
    said: bool,
    status: i32,
    /// From the cue (the command exits) to the init's exit.
    took: Duration,
}

/// The command starts two helpers that trap `SIGTERM` (one in its process
/// group, one in a session of its own), then exits 0 on its cue.
fn left_by_the_command(init: Pid1, scratch: &Scratch) -> Option<Ended> {
    helper(scratch);
    let script = "sh \"$D/helper\" inside & setsid sh \"$D/helper\" inside & \
         while [ \"$(cat \"$D/inside\" 2>/dev/null | wc -l)\" -lt 2 ]; do sleep 0.01; done; \
         echo ready; read cue; exit 0";
    let mut run = Run::start(init, script, scratch, "left")?;
    let cued = Instant::now();
    run.cue();
    Some(finish(run, cued, scratch, 2))
}

/// A helper enters the namespace from outside (`nsenter`, as `docker exec
/// -d` does) and stays; then the command exits 0.
fn entered_from_outside(init: Pid1, scratch: &Scratch) -> Option<Ended> {
    let script =
        "echo ready; read cue; while [ ! -s \"$D/outsider\" ]; do sleep 0.01; done; exit 0";
    helper(scratch);
    let mut run = Run::start(init, script, scratch, "outsider")?;
    let entered = Command::new(NSENTER)
        .arg(format!("--target={}", run.init.pid))
        .args(["--pid", "--mount", "--", "sh", "-c"])
        .arg("sh \"$D/helper\" outsider </dev/null >/dev/null 2>&1 &")
        .env(MARK, &run.mark)
        .env("D", scratch.path(""))
        .status()
        .expect("run nsenter");
    assert!(entered.success(), "nsenter: {entered:?}");
    let cued = Instant::now();
    run.cue();
    Some(finish(run, cued, scratch, 1))
}

fn finish(run: Run, cued: Instant, scratch: &Scratch, started: usize) -> Ended {
    let (status, said, mark) = run.end();
    let took = cued.elapsed();
    let lines = |name: &str| {
        std::fs::read_to_string(scratch.path(name))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let left = corral_tests::proc::with_env(MARK, &mark);
    let count = left.len();
    corral_tests::kill_leftovers(&left);
    Ended {
        gracefully: lines("ended"),
        started,
        left: count,
        said: said.iter().any(|l| l.contains("outlived the command")),
        status,
        took,
    }
}

/// As PID 1, corral reaps every orphan of the namespace, not only its
/// command's tree's: eight exited orphans leave no zombie (before, all
/// eight stayed zombies until the end).
#[test]
fn as_pid_1_corral_reaps_every_orphan_of_the_namespace() {
    if !namespaces() {
        return;
    }
    let scratch = Scratch::new("pid1-zombies");
    assert_eq!(zombies(Pid1::Corral, &scratch), Some(0));
}

/// As PID 1, each signal `docker stop` and `docker kill` send reaches the
/// command, whose trap runs, and corral exits with the command's status
/// (3, the trap's), not 128+N of its own; a command killed by `SIGTERM`
/// makes it exit 143.
#[test]
fn as_pid_1_corral_passes_each_signal_on_and_exits_with_the_commands_status() {
    if !namespaces() {
        return;
    }
    let scratch = Scratch::new("pid1-signals");
    let mut wrong = Vec::new();
    for (name, signal) in SIGNALS {
        let passed = pass(Pid1::Corral, name, signal, &scratch).expect("corral");
        if !passed.recorded || passed.status != 3 {
            wrong.push((name, passed));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(killed_status(Pid1::Corral, &scratch), Some(143));
}

/// corral started as `timeout` is the same init: orphans reaped, `SIGINT`
/// (which GNU `timeout` would turn into the end of the tree) passed on,
/// the command's status.
#[test]
fn as_pid_1_timeout_reaps_and_passes_signals_too() {
    if !namespaces() {
        return;
    }
    let scratch = Scratch::new("pid1-timeout-run");
    assert_eq!(zombies(Pid1::CorralTimeout, &scratch), Some(0));
    let passed = pass(Pid1::CorralTimeout, "INT", Signal::INT, &scratch).expect("timeout");
    assert!(passed.recorded && passed.status == 3, "{passed:?}");
    let _ = std::fs::remove_dir_all(corral_tests::scratch("pid1-timeout"));
}

/// As PID 1, what is left in the namespace once the command's tree has
/// ended (a helper that entered it from outside: no tree's member) gets
/// the policy's `SIGTERM`, its trap runs, and corral names it; an init
/// that just exits leaves it to the kernel's `SIGKILL`.
#[test]
fn as_pid_1_corral_ends_what_is_left_in_the_namespace_and_says_so() {
    if !namespaces() {
        return;
    }
    let scratch = Scratch::new("pid1-outsider");
    let ended = entered_from_outside(Pid1::Corral, &scratch).expect("corral");
    assert_eq!(ended.status, 0, "{ended:#?}");
    assert_eq!(ended.gracefully, 1, "{ended:#?}");
    assert!(ended.said, "{ended:#?}");
    assert_eq!(ended.left, 0, "{ended:#?}");
}

/// The same as an unprivileged user would run it: a user namespace with
/// root mapped (`unshare --user --map-root-user`, no cgroup to write, so
/// the subreaper backend), entered as `nobody` when the test runs as root,
/// as the test's own user otherwise (`scripts/test-unprivileged`): orphans
/// reaped, signals passed on.
#[test]
fn as_pid_1_of_an_unprivileged_namespace_corral_reaps_and_passes_signals() {
    if !Path::new(UNSHARE).exists() {
        corral_tests::skipped(format!("{UNSHARE} is not installed (util-linux)"));
        return;
    }
    let scratch = Scratch::new("pid1-unprivileged");
    let prefix: &[&str] = if corral_tests::is_root() {
        &[
            "/usr/bin/setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ]
    } else {
        &[]
    };
    let mut probe = match prefix.split_first() {
        Some((first, rest)) => {
            let mut probe = Command::new(first);
            probe.args(rest).arg(UNSHARE);
            probe
        }
        None => Command::new(UNSHARE),
    };
    let probe = probe
        .args(["--user", "--map-root-user", "--pid", "--fork", "true"])
        .status();
    if !probe.is_ok_and(|s| s.success()) {
        corral_tests::skipped("this kernel refuses user namespaces to an unprivileged user");
        return;
    }
    let mut user_prefix: Vec<&str> = prefix.to_vec();
    user_prefix.extend([UNSHARE, "--user", "--map-root-user"]);
    // `Run::start_with` appends `unshare --pid ...` after the prefix: the
    // user namespace's unshare runs it.
    let mut run =
        Run::start_with(&user_prefix, Pid1::Corral, ORPHANS, &scratch, "userns").expect("corral");
    let pid = run.init.pid;
    let zombies = || {
        children(pid)
            .into_iter()
            .filter_map(state)
            .filter(|(s, _)| *s == 'Z')
            .count()
    };
    let sleeping = || {
        children(pid)
            .into_iter()
            .filter_map(state)
            .any(|(s, line)| s != 'Z' && line.starts_with("sleep 0.05"))
    };
    assert!(corral_tests::wait_until(LIMIT, || !sleeping()));
    assert!(
        corral_tests::wait_until(Duration::from_secs(2), || zombies() == 0),
        "{} zombies",
        zombies()
    );
    run.cue();
    assert_eq!(run.end().0, 0);
    let script = "trap 'echo got INT; exit 3' INT; echo ready; while :; do sleep 0.02; done";
    let run = Run::start_with(&user_prefix, Pid1::Corral, script, &scratch, "userns-int")
        .expect("corral");
    assert!(run.init.signal(Signal::INT));
    assert_eq!(
        run.lines.next(Duration::from_secs(3)).as_deref(),
        Some("got INT")
    );
    assert_eq!(run.end().0, 3);
}

/// One init's row of the comparison.
struct Row {
    init: Pid1,
    zombies: usize,
    signals: Vec<(&'static str, Passed)>,
    killed: i32,
    term_to_exit: Duration,
    left: Ended,
    outsider: Ended,
}

fn row(init: Pid1) -> Option<Row> {
    let scratch = |name: &str| Scratch::new(&format!("pid1-table-{name}"));
    let zombies = zombies(init, &scratch("zombies"))?;
    let mut signals = Vec::new();
    for (name, signal) in SIGNALS {
        signals.push((name, pass(init, name, signal, &scratch(name))?));
    }
    // The median of five runs of the TERM case.
    let mut times: Vec<Duration> = (0..5)
        .map(|_| pass(init, "TERM", Signal::TERM, &scratch("term")).map(|p| p.took))
        .collect::<Option<_>>()?;
    times.sort_unstable();
    Some(Row {
        init,
        zombies,
        signals,
        killed: killed_status(init, &scratch("killed"))?,
        term_to_exit: times[2],
        left: left_by_the_command(init, &scratch("left"))?,
        outsider: entered_from_outside(init, &scratch("outsider"))?,
    })
}

/// `corral run`, `tini` and `dumb-init`, each as PID 1 of a new PID
/// namespace, on the same scenarios. corral matches both wherever both are
/// right, and beats both on ending what is left: the helpers the command
/// left, and one that entered the namespace from outside, get `SIGTERM`
/// and a grace (their traps run) where the others leave them to the
/// kernel's `SIGKILL` when they exit. `UPDATE_GOLDEN=1` rewrites the table
/// in `docs/pid1.md`.
#[test]
fn pid_1_side_by_side_with_tini_and_dumb_init() {
    if !namespaces() {
        return;
    }
    let mut rows = Vec::new();
    for init in [Pid1::Corral, Pid1::Tini, Pid1::DumbInit] {
        match row(init) {
            Some(row) => rows.push(row),
            None => return,
        }
    }
    let table = table(&rows);
    println!("{table}");
    let (corral, others) = rows.split_first().expect("three rows");
    // Right where both are right.
    if others.iter().all(|o| o.zombies == 0) {
        assert_eq!(corral.zombies, 0, "{table}");
    }
    for (i, (name, passed)) in corral.signals.iter().enumerate() {
        let right = |p: &Passed| p.recorded && p.status == 3;
        if others.iter().all(|o| right(&o.signals[i].1)) {
            assert!(right(passed), "{name}: {table}");
        }
    }
    if others.iter().all(|o| o.killed == 143) {
        assert_eq!(corral.killed, 143, "{table}");
    }
    // Better on ending what is left.
    for other in others {
        assert!(
            corral.left.gracefully > other.left.gracefully
                && corral.outsider.gracefully > other.outsider.gracefully,
            "{table}"
        );
    }
    assert_eq!(corral.left.gracefully, corral.left.started, "{table}");
    assert_eq!(corral.outsider.gracefully, 1, "{table}");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/pid1.md");
        let text = std::fs::read_to_string(&path).expect("docs/pid1.md");
        let (head, rest) = text.split_once(BEGIN).expect("the table's begin marker");
        let (_, tail) = rest.split_once(END).expect("the table's end marker");
        std::fs::write(&path, format!("{head}{BEGIN}\n{table}{END}{tail}")).expect("write");
    }
}

const BEGIN: &str = "<!-- pid1 table: generated by crates/corral-cli/tests/pid1.rs -->";
const END: &str = "<!-- end of the pid1 table -->";

/// The table, one column per init.
fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let cells = |f: &dyn Fn(&Row) -> String| {
        rows.iter()
            .map(|r| format!(" {} |", f(r)))
            .collect::<String>()
    };
    let _ = writeln!(out, "| scenario |{}", cells(&|r| r.init.name().to_owned()));
    let _ = writeln!(out, "|---|{}", "---|".repeat(rows.len()));
    let _ = writeln!(
        out,
        "| zombies left of 8 exited orphans (2 s after they exited) |{}",
        cells(&|r| r.zombies.to_string())
    );
    for (i, (name, _)) in SIGNALS.iter().enumerate() {
        let _ = writeln!(
            out,
            "| SIG{name} sent to PID 1: the command's trap ran; exit status (the trap exits 3) |{}",
            cells(&|r| {
                let p = r.signals[i].1;
                format!(
                    "{}; {}",
                    if p.recorded { "yes" } else { "**no**" },
                    p.status
                )
            })
        );
    }
    let _ = writeln!(
        out,
        "| exit status when SIGTERM kills the command |{}",
        cells(&|r| r.killed.to_string())
    );
    let _ = writeln!(
        out,
        "| SIGTERM to exit, the command trapping it and exiting at once (median of 5) |{}",
        cells(&|r| format!("{:.0} ms", r.term_to_exit.as_secs_f64() * 1000.0))
    );
    let tini = rows
        .iter()
        .find(|r| r.init == Pid1::Tini)
        .map(|r| r.term_to_exit.as_secs_f64());
    let _ = writeln!(
        out,
        "| ... relative to tini |{}",
        cells(&|r| tini.map_or("-".to_owned(), |t| format!(
            "{:.1}x",
            r.term_to_exit.as_secs_f64() / t
        )))
    );
    let _ = writeln!(
        out,
        "| helpers the command left (own group, own session): ended by the init with SIGTERM, their trap run |{}",
        cells(&|r| format!("{} of {}", r.left.gracefully, r.left.started))
    );
    let _ = writeln!(
        out,
        "| a helper that entered the namespace (`nsenter`, as `docker exec -d`): ended with SIGTERM, its trap run |{}",
        cells(&|r| format!("{} of {}", r.outsider.gracefully, r.outsider.started))
    );
    let _ = writeln!(
        out,
        "| ... the init said what was left |{}",
        cells(&|r| if r.outsider.said { "yes" } else { "no" }.to_owned())
    );
    let _ = writeln!(
        out,
        "| processes left once the init exited (marker in the environment, `/proc` scanned) |{}",
        cells(&|r| (r.left.left + r.outsider.left).to_string())
    );
    let _ = writeln!(
        out,
        "| from the command's exit to the init's, helpers left |{}",
        cells(&|r| format!("{:.0} ms", r.left.took.as_secs_f64() * 1000.0))
    );
    let _ = writeln!(
        out,
        "| exit status, the command exiting 0 with helpers left |{}",
        cells(&|r| format!("{} / {}", r.left.status, r.outsider.status))
    );
    out
}

/// As PID 1, corral waits for what is left in the namespace on a pidfd,
/// not by looking again at growing intervals: a helper that entered from
/// outside and takes 0.3 s to end on `SIGTERM` (its trap sleeps) is looked
/// at a handful of times in that grace (each look is a debug line), where a
/// poll of 1 ms doubling to 50 ms looked a dozen times (and saw the end up
/// to 50 ms late). The helper still ends by its trap, and nothing is left.
#[test]
fn as_pid_1_corral_waits_for_what_is_left_on_a_pidfd_not_a_poll() {
    if !namespaces() {
        return;
    }
    let scratch = Scratch::new("pid1-rest-pidfd");
    std::fs::write(
        scratch.path("helper"),
        "trap 'sleep 0.3; echo ended >> \"$D/ended\"; exit 0' TERM\n\
         echo started >> \"$D/$1\"\n\
         while :; do sleep 1000 & wait $!; done\n",
    )
    .expect("write the helper");
    let script =
        "echo ready; read cue; while [ ! -s \"$D/outsider\" ]; do sleep 0.01; done; exit 0";
    let mut run = Run::start_with(
        &["/usr/bin/env", "RUST_LOG=corral::init=debug"],
        Pid1::Corral,
        script,
        &scratch,
        "rest-pidfd",
    )
    .expect("corral");
    let entered = Command::new(NSENTER)
        .arg(format!("--target={}", run.init.pid))
        .args(["--pid", "--mount", "--", "sh", "-c"])
        .arg("sh \"$D/helper\" outsider </dev/null >/dev/null 2>&1 &")
        .env(MARK, &run.mark)
        .env("D", scratch.path(""))
        .status()
        .expect("run nsenter");
    assert!(entered.success(), "nsenter: {entered:?}");
    run.cue();
    let (status, said, mark) = run.end();
    let left = corral_tests::proc::with_env(MARK, &mark);
    corral_tests::kill_leftovers(&left);
    let ended = std::fs::read_to_string(scratch.path("ended")).unwrap_or_default();
    assert_eq!(status, 0, "{said:#?}");
    assert_eq!(ended.lines().count(), 1, "the helper's trap ran: {said:#?}");
    assert!(left.is_empty(), "left: {left:?}");
    let looks = said
        .iter()
        .filter(|l| l.contains("looked at what is left in the namespace"))
        .count();
    assert!(
        (1..=5).contains(&looks),
        "{looks} looks in a 0.3 s grace: {said:#?}"
    );
}
