//! Limits and bad input: roots, the output cap, the time cap, concurrency,
//! field errors, the audit log.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde_json::{Value, json};

use crate::harness::{serve, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cwd_must_resolve_inside_a_root() {
    let served = serve("roots", |_| {}).await;
    std::fs::create_dir_all(served.path("inside")).expect("a dir");
    std::os::unix::fs::symlink("/", served.path("out")).expect("a symlink");
    let inside = served.run(json!({"argv": ["pwd"], "cwd": "inside"})).await;
    assert_eq!(inside["outcome"], "exited", "{inside}");
    for escape in ["..", "inside/../..", "out", "/"] {
        let result = served
            .call("run", json!({"argv": ["pwd"], "cwd": escape}))
            .await;
        assert_eq!(result.is_error, Some(true), "{escape}: {}", text(&result));
        assert!(
            text(&result).contains("`cwd`"),
            "{escape}: {}",
            text(&result)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_names_the_field_and_the_rule_and_the_server_keeps_serving() {
    let served = serve("bad-input", |options| {
        options.max_timeout = Duration::from_secs(60)
    })
    .await;
    let cases: &[(Value, &str)] = &[
        (json!({"argv": ["true"], "colour": "red"}), "colour"),
        (json!({"argv": ["true"], "shell": "true"}), "argv"),
        (json!({}), "argv"),
        (json!({"argv": []}), "argv"),
        (json!({"argv": ["true"], "timeout": 3600}), "timeout"),
        (json!({"argv": ["true"], "env": {"A": 1}}), "env.A"),
        (json!({"argv": ["true"], "timeout": "soon"}), "timeout"),
        // A grace above the server's would hold a TERM-ignoring tree past
        // its timeout, its cancellation and the shutdown.
        (json!({"argv": ["true"], "kill_after": 1e9}), "kill_after"),
        (
            json!({"argv": ["true"], "kill_after": "1000h"}),
            "kill_after",
        ),
    ];
    for (arguments, field) in cases {
        let result = served.call("run", arguments.clone()).await;
        assert_eq!(result.is_error, Some(true), "{arguments}");
        assert!(
            text(&result).contains(&format!("`{field}`")),
            "{arguments}: {}",
            text(&result)
        );
    }
    let unknown = served.call("no_such_tool", json!({})).await;
    assert_eq!(unknown.is_error, Some(true));
    let fine = served.run(json!({"argv": ["true"]})).await;
    assert_eq!(fine["outcome"], "exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_over_the_cap_keeps_head_and_tail_and_says_how_much_was_dropped() {
    let served = serve("cap", |options| options.max_output = 1000).await;
    let value = served
        .run(json!({"shell": "echo FIRST; head -c 100000 /dev/zero | tr '\\\\0' x; echo; echo LAST"}))
        .await;
    let stdout = value["stdout"].as_str().expect("stdout");
    assert!(stdout.starts_with("FIRST\n"), "{stdout:.80}");
    assert!(stdout.ends_with("LAST\n"), "{stdout}");
    assert!(stdout.contains("bytes dropped"), "{stdout}");
    assert!(
        value["stdout_dropped"]
            .as_u64()
            .is_some_and(|dropped| dropped > 90_000),
        "{value}"
    );
    assert!(stdout.len() < 1200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_calls_with_eight_slots_never_run_more_than_eight_trees() {
    let served = Arc::new(serve("concurrency", |options| options.max_concurrent = 8).await);
    let live = served.path("live");
    std::fs::create_dir_all(&live).expect("a dir");
    let shell = format!("touch {0}/$$; sleep 0.2; rm {0}/$$", live.display());
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (most, done, live) = (most.clone(), done.clone(), live.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let now = std::fs::read_dir(&live).map_or(0, Iterator::count);
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let (served, shell) = (served.clone(), shell.clone());
        calls.spawn(async move { served.run(json!({"shell": shell})).await });
    }
    let results = calls.join_all().await;
    done.store(true, Ordering::SeqCst);
    sampler.await.expect("sampler");
    assert_eq!(results.len(), 100);
    assert!(
        results.iter().all(|value| value["outcome"] == "exited"),
        "all 100 answered"
    );
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 8, "{most} trees alive at once");
    assert!(most >= 2, "the calls ran concurrently ({most})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_server_can_refuse_instead_of_waiting() {
    let served = Arc::new(
        serve("busy", |options| {
            options.max_concurrent = 1;
            options.reject_when_busy = true;
        })
        .await,
    );
    let slow = {
        let served = served.clone();
        tokio::spawn(async move { served.run(json!({"argv": ["sleep", "2"]})).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = served.call("run", json!({"argv": ["true"]})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("busy"), "{}", text(&refused));
    assert_eq!(slow.await.expect("joined")["outcome"], "exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_leaves_one_whole_audit_line() {
    let audit = corral_tests::Scratch::new("audit-file");
    let file = audit.path("audit.jsonl");
    let path = file.clone();
    let served = serve("audit", move |options| options.audit = Some(path)).await;
    served.run(json!({"argv": ["echo", "hi"]})).await;
    served
        .run(json!({"shell": "sleep 5", "timeout": 0.2}))
        .await;
    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .expect("the audit file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a whole JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["argv"], json!(["echo", "hi"]));
    assert_eq!(lines[0]["outcome"], "exited");
    assert_eq!(lines[0]["stdout_bytes"], 3);
    assert_eq!(lines[1]["outcome"], "timed_out");
    assert_eq!(lines[1]["shell"], "sleep 5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_tool_is_annotated_as_not_read_only_not_idempotent_open_world() {
    let served = serve("annotations", |_| {}).await;
    let tools = served.client.peer().list_all_tools().await.expect("tools");
    let run = tools.iter().find(|tool| tool.name == "run").expect("run");
    let annotations = run.annotations.as_ref().expect("annotations");
    assert_eq!(annotations.read_only_hint, Some(false));
    assert_eq!(annotations.idempotent_hint, Some(false));
    assert_eq!(annotations.open_world_hint, Some(true));
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for name in ["run", "list_runs", "read_run", "wait_run", "kill_run"] {
        assert!(names.contains(&name), "{names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_term_ignoring_run_is_killed_within_the_servers_grace() {
    let served = serve("term-ignoring", |_| {}).await;
    let started = std::time::Instant::now();
    let value = served
        .run(json!({"shell": "trap '' TERM; sleep 20 & wait; sleep 20", "timeout": 0.3, "kill_after": 0.3}))
        .await;
    assert_eq!(value["outcome"], "timed_out", "{value}");
    assert_eq!(value["cleanup"]["escalated"], true, "{value}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_spends_the_servers_cpu_time_budget_ends_limit_exceeded() {
    // Needs only a cgroup v2 leaf (cpu.stat), no controller.
    if corral_tests::skip::cgroup_parent().is_none() {
        return;
    }
    let served = serve("cpu-budget", |options| {
        options.backend = corral::BackendChoice::Only(corral::Backend::Cgroup);
        options.tree_limits = corral::Limits::new().cpu_time(Duration::from_millis(300));
    })
    .await;
    // A busy loop in the background too: the budget is the whole tree's.
    let result = served
        .run(json!({"shell": "(while :; do :; done) & while :; do :; done", "timeout": 60}))
        .await;
    assert_eq!(result["outcome"], "limit_exceeded", "{result}");
    assert_eq!(result["limits"]["ended_by"], "cpu_time", "{result}");
    assert_eq!(result["limits"]["tree"]["cpu_time_s"], 0.3, "{result}");
    assert_eq!(result["effects_unknown"], true);
    let counted = &result["cleanup"]["limits"];
    assert!(
        counted["cpu_used"].as_f64().unwrap_or_default() >= 0.3,
        "{result}"
    );
    assert_eq!(result["cleanup"]["survivors"], json!([]), "{result}");
    // A quick run under the same budget ends as without one.
    let quick = served.run(json!({"argv": ["true"]})).await;
    assert_eq!(quick["outcome"], "exited", "{quick}");
}
