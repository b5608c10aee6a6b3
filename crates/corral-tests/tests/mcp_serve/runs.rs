//! Outcomes, output, background jobs, cancellation, background runs.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
use serde_json::json;

use crate::harness::{args, assert_gone, record, recorded, serve, structured, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_is_named_with_its_status_and_output() {
    let served = serve("outcomes", |_| {}).await;
    let exited = served
        .run(json!({"argv": ["sh", "-c", "echo out; echo err >&2; exit 3"]}))
        .await;
    assert_eq!(exited["outcome"], "exited", "{exited}");
    assert_eq!(exited["exit_code"], 3);
    assert_eq!(exited["stdout"], "out\n");
    assert_eq!(exited["stderr"], "err\n");
    assert_eq!(exited["effects_unknown"], false);
    assert!(exited["cleanup"]["backend"].is_string(), "{exited}");
    let signaled = served.run(json!({"shell": "kill -KILL $$"})).await;
    assert_eq!(signaled["outcome"], "signaled", "{signaled}");
    assert_eq!(signaled["signal"], "SIGKILL");
    let stdin = served
        .run(json!({"argv": ["cat"], "stdin": "fed in"}))
        .await;
    assert_eq!(stdin["stdout"], "fed in");
    let env = served
        .run(json!({"shell": "echo $GREETING", "env": {"GREETING": "hello"}}))
        .await;
    assert_eq!(env["stdout"], "hello\n");
    // The default stdin is empty, never the server's.
    let empty = served.run(json!({"argv": ["cat"]})).await;
    assert_eq!(empty["outcome"], "exited");
    assert_eq!(empty["stdout"], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_keeps_the_output_so_far_and_says_the_effects_are_unknown() {
    let served = serve("timeout", |_| {}).await;
    let result = served
        .call(
            "run",
            json!({"shell": "echo before; sleep 30", "timeout": 0.5}),
        )
        .await;
    let value = structured(&result);
    assert_eq!(value["outcome"], "timed_out", "{value}");
    assert_eq!(value["stdout"], "before\n");
    assert_eq!(value["effects_unknown"], true);
    assert!(
        value["note"]
            .as_str()
            .is_some_and(|note| note.contains("not undone")),
        "{value}"
    );
    assert_eq!(value["limits"]["ended_by"], "timeout");
    assert!(text(&result).contains("timed out"), "{}", text(&result));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setsid_job_holding_stdout_neither_delays_the_answer_nor_survives() {
    let served = serve("setsid", |_| {}).await;
    let pids = served.path("pids");
    let shell = format!("setsid sleep 600 & {}; echo started", record("$!", &pids));
    let started = Instant::now();
    let value = served.run(json!({"shell": shell})).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(value["outcome"], "exited", "{value}");
    assert_eq!(value["stdout"], "started\n");
    let job = recorded(&pids);
    assert_eq!(job.len(), 1, "the job's identity");
    assert_gone(&job);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_ends_its_tree_and_says_the_outcome_is_unknown() {
    let served = serve("cancel", |_| {}).await;
    let pids = served.path("pids");
    let shell = format!(
        "{}; sleep 600 & {}; wait",
        record("$$", &pids),
        record("$!", &pids)
    );
    let params = CallToolRequestParams::new("run").with_arguments(args(json!({"shell": shell})));
    let request = ClientRequest::CallToolRequest(Request::new(params));
    let handle = served
        .client
        .peer()
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await
        .expect("sent");
    let recorded_both =
        corral_tests::wait_until_async(Duration::from_secs(20), || recorded(&pids).len() == 2)
            .await;
    assert!(recorded_both, "the command started");
    let tree = recorded(&pids);
    handle.cancel(Some("test".into())).await.expect("cancelled");
    // The tree ends within the policy's bound (grace 0.5 s + final bound).
    let gone = corral_tests::wait_until_async(Duration::from_secs(10), || {
        tree.iter().all(|p| !p.is_alive())
    })
    .await;
    assert_gone(&tree);
    assert!(gone);
    // The server keeps serving.
    let after = served.run(json!({"argv": ["true"]})).await;
    assert_eq!(after["outcome"], "exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_run_is_listed_read_waited_for_and_killed() {
    let served = serve("background", |_| {}).await;
    let pids = served.path("pids");
    let shell = format!(
        "{}; echo one; sleep 600 & {}; echo two; wait",
        record("$$", &pids),
        record("$!", &pids)
    );
    let started = served
        .run(json!({"shell": shell, "background": true, "timeout": 600}))
        .await;
    let id = started["run_id"].as_str().expect("a run id").to_owned();
    assert_eq!(started["state"], "running");
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(20), || recorded(&pids).len() == 2)
            .await
    );
    let tree = recorded(&pids);
    let listed = structured(&served.call("list_runs", json!({})).await);
    assert!(
        listed["runs"].as_array().is_some_and(|runs| runs
            .iter()
            .any(|run| run["id"] == id.as_str() && run["state"] == "running")),
        "{listed}"
    );
    // Polled through the tool itself (each read is a call).
    let mut read = json!(null);
    for _ in 0..100 {
        read = structured(&served.call("read_run", json!({"id": id})).await);
        if read["stdout"]["data"]
            .as_str()
            .is_some_and(|data| data.contains("two"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(read["stdout"]["data"], "one\ntwo\n", "{read}");
    let next = read["stdout"]["next"].as_u64().expect("next");
    let again = structured(
        &served
            .call("read_run", json!({"id": id, "stdout_offset": next}))
            .await,
    );
    assert_eq!(again["stdout"]["data"], "", "nothing new past the offset");
    let waited = structured(
        &served
            .call("wait_run", json!({"id": id, "timeout": 0.2}))
            .await,
    );
    assert_eq!(waited["state"], "running");
    let killed = structured(&served.call("kill_run", json!({"id": id})).await);
    assert_eq!(killed["outcome"], "cancelled", "{killed}");
    assert_eq!(killed["effects_unknown"], true);
    assert_gone(&tree);
    let listed = structured(&served.call("list_runs", json!({})).await);
    assert!(
        listed["runs"].as_array().is_some_and(|runs| runs
            .iter()
            .any(|run| run["id"] == id.as_str() && run["state"] == "finished")),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_every_run_foreground_and_background() {
    let served = serve("shutdown", |_| {}).await;
    let pids = served.path("pids");
    let background = format!("{}; sleep 600", record("$$", &pids));
    served
        .run(json!({"shell": background, "background": true, "timeout": 600}))
        .await;
    let foreground = format!("{}; sleep 600", record("$$", &pids));
    let client = served.client.peer().clone();
    let call = tokio::spawn(async move {
        let params = CallToolRequestParams::new("run")
            .with_arguments(args(json!({"shell": foreground, "timeout": 600})));
        client.call_tool(params).await
    });
    assert!(
        corral_tests::wait_until_async(Duration::from_secs(20), || recorded(&pids).len() == 2)
            .await
    );
    let tree = recorded(&pids);
    tokio::time::timeout(Duration::from_secs(30), served.runner.shutdown())
        .await
        .expect("shutdown returned");
    assert_gone(&tree);
    let answered = call.await.expect("joined").expect("answered");
    assert_eq!(structured(&answered)["outcome"], "cancelled");
    let refused = served.call("run", json!({"argv": ["true"]})).await;
    assert_eq!(refused.is_error, Some(true));
}
