//! Runs that stay where they were put: a `cwd` swapped for a symlink while
//! calls run never moves a run out of the roots, and the result names the
//! directory the run used; relative `PATH` entries are searched from the
//! run's `cwd`.

use std::{
    fs,
    os::unix::fs::{PermissionsExt, symlink},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use serde_json::json;

use crate::harness::serve;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cwd_swapped_for_a_symlink_while_calls_run_never_runs_outside_the_roots() {
    const CALLS: usize = 400;
    const AT_ONCE: usize = 8;
    let served = serve("serve-cwd-swap", |options| {
        options.max_concurrent = AT_ONCE;
    })
    .await;
    let outside = corral_tests::Scratch::new("serve-cwd-swap-outside");
    fs::write(outside.path("marker"), "OUTSIDE\n").expect("outside marker");
    let real = served.path("real");
    fs::create_dir(&real).expect("real");
    fs::write(real.join("marker"), "INSIDE\n").expect("inside marker");
    let link = served.path("link");
    symlink(&outside.0, &link).expect("link");
    // The hostile swapper: `cwd` flips between the real directory and a
    // symlink out of the root, as fast as it can, until the calls are done.
    let cwd = served.path("cwd");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let (real, link, cwd) = (real.clone(), link.clone(), cwd.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for entry in [&real, &link] {
                    if fs::rename(entry, &cwd).is_ok() {
                        flips += 1;
                        let _ = fs::rename(&cwd, entry);
                    }
                }
            }
            flips
        })
    };
    let (mut ran, mut refused) = (0, 0);
    for _ in 0..CALLS / AT_ONCE {
        let calls = (0..AT_ONCE).map(|_| {
            served.run(json!({"shell": "cat marker; pwd -P", "cwd": "cwd", "timeout": 10}))
        });
        for result in futures_util::future::join_all(calls).await {
            if result["outcome"] == "exited" {
                ran += 1;
                let stdout = result["stdout"].as_str().unwrap_or_default();
                assert!(
                    stdout.starts_with("INSIDE\n"),
                    "a run left the roots: {result:#}"
                );
                let named = result["cwd"].as_str().unwrap_or_default();
                assert!(
                    named.starts_with(&*served.root.0.to_string_lossy()),
                    "the result names a directory outside the root: {result:#}"
                );
            } else {
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = swapper.join().expect("the swapper");
    println!("{ran} ran inside, {refused} refused, {flips} flips");
    assert!(ran > 0, "no call ran: the test proves nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relative_path_entries_in_env_are_searched_from_the_cwd() {
    let served = serve("serve-relative-path", |_| {}).await;
    let bin = served.path("work/bin");
    fs::create_dir_all(&bin).expect("bin");
    let program = bin.join("corral-found-here");
    fs::write(&program, "#!/bin/sh\necho found in the run cwd\n").expect("script");
    fs::set_permissions(&program, fs::Permissions::from_mode(0o755)).expect("chmod");
    let result = served
        .run(json!({
            "argv": ["corral-found-here"],
            "cwd": "work",
            "env": {"PATH": "bin:/usr/bin:/bin"},
        }))
        .await;
    assert_eq!(result["outcome"], "exited", "{result:#}");
    assert_eq!(result["stdout"], "found in the run cwd\n", "{result:#}");
}
