//! `owner`: a program that uses the corral library the way an agent runtime
//! would, for the owner-death tests. It calls the watchdog hook first, runs
//! one fixture tree, and prints, once the tree is ready:
//!
//! `owner <own pid> watchdog <watchdog pid or 0> tree <pid> <pid>...`
//!
//! Usage: `owner BACKEND [--timeout-ms N] [--grace-ms N] [--no-watchdog]
//! [--runtime-watched] [--program PATH] -- FIXTURE-ARGS...` with BACKEND one
//! of auto, cgroup, subreaper, group; `--runtime-watched` forks the watchdog
//! with `fork_now_for_runtime` and watches it from the runtime
//! (`watch_over`) instead of a thread; `--program` runs PATH with the
//! arguments instead of the fixture (its first line must be `ready <pid>...`
//! too). It then waits for the
//! tree and prints `finished <outcome>`. Tests kill it with SIGKILL at chosen
//! points and check that the watchdog ends the tree.

use std::{io::Write, time::Duration};

use corral::{Backend, BackendChoice, Command};

fn usage() -> ! {
    eprintln!("owner: usage: owner BACKEND [--timeout-ms N] [--grace-ms N] -- FIXTURE-ARGS...");
    std::process::exit(2);
}

fn main() {
    corral::watchdog::hook();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        usage()
    };
    let (options, fixture_args) = (&args[..split], &args[split + 1..]);
    let backend = match options.first().map(String::as_str) {
        Some("auto") => BackendChoice::Auto,
        Some("cgroup") => BackendChoice::Only(Backend::Cgroup),
        Some("subreaper") => BackendChoice::Only(Backend::Subreaper),
        Some("group") => BackendChoice::Only(Backend::Group),
        _ => usage(),
    };
    let number = |flag: &str| -> Option<u64> {
        let at = options.iter().position(|o| o == flag)?;
        options
            .get(at + 1)
            .and_then(|v| v.parse().ok())
            .or_else(|| usage())
    };
    let runtime_watched = options.iter().any(|o| o == "--runtime-watched");
    if runtime_watched && let Err(error) = corral::watchdog::fork_now_for_runtime() {
        eprintln!("owner: {error}");
        std::process::exit(1);
    }
    corral::settings::Settings::new().subreaper().apply();
    let fixture: std::path::PathBuf = match options.iter().position(|o| o == "--program") {
        Some(at) => options.get(at + 1).map_or_else(|| usage(), Into::into),
        None => std::env::current_exe()
            .map(|exe| exe.with_file_name("fixture"))
            .unwrap_or_else(|_| usage()),
    };
    let mut command = Command::new(fixture);
    command
        .args(fixture_args)
        .backend(backend)
        .grace(Duration::from_millis(number("--grace-ms").unwrap_or(300)));
    if options.iter().any(|o| o == "--no-watchdog") {
        command.watchdog(false);
    }
    if let Some(ms) = number("--timeout-ms") {
        command.timeout(Duration::from_millis(ms));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("owner: {e}");
            std::process::exit(1)
        });
    let code = runtime.block_on(async move {
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => {
                eprintln!("owner: {error}");
                return 1;
            }
        };
        let mut tap = child.stdout_tap().unwrap_or_else(|| usage());
        if tap.wait_for(|b| b.contains(&b'\n')).await {
            let snapshot = tap.snapshot();
            let line = String::from_utf8_lossy(&snapshot);
            let pids = line
                .lines()
                .next()
                .unwrap_or_default()
                .trim_start_matches("ready")
                .trim()
                .to_owned();
            let watchdog = corral::watchdog::helper_pid().unwrap_or(0);
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "owner {} watchdog {watchdog} tree {pids}",
                std::process::id()
            );
            let _ = out.flush();
        }
        let mut wait = std::pin::pin!(child.wait());
        let mut watch_over = std::pin::pin!(corral::watchdog::watch_over());
        let mut watching = runtime_watched;
        let finished = loop {
            tokio::select! {
                finished = &mut wait => break finished,
                () = &mut watch_over, if watching => watching = false,
            }
        };
        match finished {
            Ok(finished) => {
                println!(
                    "finished {:?} survivors {}",
                    finished.outcome,
                    finished.report.survivors.len()
                );
                0
            }
            Err(error) => {
                eprintln!("owner: {error}");
                1
            }
        }
    });
    corral::watchdog::shutdown();
    std::process::exit(code);
}
