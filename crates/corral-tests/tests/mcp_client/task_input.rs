//! A task that asks for input (SEP-2663 `input_required`) against a real
//! rmcp server (`mcp-tasks-peer`): the client answers each question once
//! with `tasks/update`, by its elicitation policy, and follows the task to
//! its result; a client that cannot answer gives the task up with
//! `tasks/cancel` and says what was asked, instead of polling until its
//! deadline.

use std::time::Duration;

use corral_mcp::client::{
    CallError, CallOptions, ConnectOptions, Connection, Elicitation, MAX_INPUT_ROUNDS, TaskEnd,
    task_of,
};
use corral_tests::Scratch;
use serde_json::{Map, Value};

use crate::common::quick;

/// The call's hard deadline: far above the few polls the task needs, so a
/// client that never answers fails by it rather than hanging the suite.
const CALL: Duration = Duration::from_secs(20);

struct Peer {
    dir: Scratch,
}

impl Peer {
    fn new(name: &str) -> Self {
        Self {
            dir: Scratch::new(name),
        }
    }

    /// The peer with `--log` into this directory, and `args`.
    fn command(&self, args: &[&str]) -> corral::Command {
        let mut command = corral::Command::new(corral_tests::bin_path!("mcp-tasks-peer"));
        command
            .backend(corral_tests::containing_backend())
            .arg("--log")
            .arg(self.dir.path("log"))
            .args(args)
            .grace(Duration::from_millis(500))
            .final_bound(Duration::from_secs(2));
        command
    }

    /// The server's events, one per line (`created ID`, `updated ID
    /// KEYS`, `cancelled ID`).
    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn options(elicitation: Option<Elicitation>) -> ConnectOptions {
    let mut options = quick();
    options.tasks = true;
    options.elicitation = elicitation;
    options
}

/// A peer started with `args`, and a connection to it declaring the Tasks
/// extension, answering by `elicitation`.
async fn connect(
    name: &str,
    args: &[&str],
    elicitation: Option<Elicitation>,
) -> (Peer, Connection) {
    let peer = Peer::new(name);
    let connection = Connection::spawn(peer.command(args), options(elicitation))
        .await
        .expect("connected");
    (peer, connection)
}

/// The task id and reason of a call whose task was given up.
fn given_up(error: &CallError) -> (&str, &str) {
    match error {
        CallError::Task {
            task_id,
            end: TaskEnd::GivenUp,
            reason,
        } => (task_id, reason),
        other => panic!("not a task given up: {other:?}"),
    }
}

fn file(name: &str) -> Option<Map<String, Value>> {
    Some(Map::from_iter([("file".to_owned(), Value::from(name))]))
}

fn text(result: &rmcp::model::CallToolResult) -> String {
    serde_json::to_value(&result.content).expect("content")[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_question_of_a_task_is_answered_once_by_the_policy_and_the_task_completes() {
    let (peer, connection) =
        connect("task-input-defaults", &[], Some(Elicitation::defaults())).await;
    let result = connection
        .call_tool("confirm", file("a.txt"), &CallOptions::timeout(CALL))
        .await
        .expect("the task completes once its questions are answered");
    let id = task_of(&result).expect("the call ran as a task").to_owned();
    assert_eq!(
        text(&result),
        r#"a.txt: accept {"confirm":true}; accept {"reason":"tidy"}"#
    );
    let log = peer.log();
    assert_eq!(
        log,
        [
            format!("created {id}"),
            format!(r#"updated {id} ["confirm-1"]"#),
            format!(r#"updated {id} ["reason-1"]"#),
        ],
        "each question answered exactly once, in order, and nothing cancelled"
    );
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declining_policy_is_the_answer_the_task_gets() {
    let (_peer, connection) =
        connect("task-input-decline", &[], Some(Elicitation::decline())).await;
    let result = connection
        .call_tool("confirm", file("b.txt"), &CallOptions::timeout(CALL))
        .await
        .expect("the task completes with the declines");
    assert_eq!(text(&result), "b.txt: decline; decline");
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_a_policy_gives_the_task_up_naming_the_question() {
    let (peer, connection) = connect("task-input-none", &[], None).await;
    let error = connection
        .call_tool("confirm", file("c.txt"), &CallOptions::timeout(CALL))
        .await
        .expect_err("no answer can be given");
    let (task_id, reason) = given_up(&error);
    assert!(
        reason.contains("elicitation/create") && reason.contains("confirm-1"),
        "the reason names the question: {reason}"
    );
    assert!(
        reason.contains("tasks/cancel was acknowledged"),
        "the task was cancelled: {reason}"
    );
    assert_eq!(
        peer.log(),
        [format!("created {task_id}"), format!("cancelled {task_id}")],
        "nothing answered, the task cancelled"
    );
    // The server's own record: the task ended cancelled.
    let got = connection
        .get_task(task_id, &CallOptions::timeout(Duration::from_secs(10)))
        .await
        .expect("tasks/get");
    assert_eq!(
        got.task.task.status,
        rmcp::model::TaskStatus::Cancelled,
        "{got:?}"
    );
    connection.close().await;
}

/// A server that never stops asking gets [`MAX_INPUT_ROUNDS`] answers, then
/// its task is given up, instead of answers for as long as the call's
/// deadline lasts. Each answer it takes is progress: the idle deadline (2 s,
/// under the 3.2 s the 16 rounds take at the task's 200 ms polls) restarts
/// with it, so the call ends by the cap, not idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_keeps_asking_is_given_up_after_the_rounds_cap() {
    let (peer, connection) =
        connect("task-input-endless", &[], Some(Elicitation::defaults())).await;
    let mut call = CallOptions::timeout(Duration::from_secs(60));
    call.idle_timeout = Some(Duration::from_secs(2));
    let error = connection
        .call_tool("endless", None, &call)
        .await
        .expect_err("the questions never end");
    let (task_id, reason) = given_up(&error);
    assert!(
        reason.contains(&format!("after {MAX_INPUT_ROUNDS} answers")),
        "given up by the cap: {reason}"
    );
    let mut expected = vec![format!("created {task_id}")];
    expected
        .extend((1..=MAX_INPUT_ROUNDS).map(|round| format!(r#"updated {task_id} ["q-{round}"]"#)));
    expected.push(format!("cancelled {task_id}"));
    assert_eq!(peer.log(), expected);
    connection.close().await;
}

/// A server that never acknowledges `tasks/update` cannot hold a call that
/// has only an idle deadline: the update is bounded by that deadline too,
/// and the task is given up (`tasks/cancel`) once it passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_never_acknowledged_is_bounded_by_the_idle_deadline() {
    let (peer, connection) = connect(
        "task-input-held",
        &["--hold-updates"],
        Some(Elicitation::defaults()),
    )
    .await;
    let mut call = CallOptions::default();
    call.idle_timeout = Some(Duration::from_secs(1));
    // Bounds the test, not the call: without the mechanism the call would
    // wait for ever.
    let ended = tokio::time::timeout(CALL, connection.call_tool("confirm", file("d.txt"), &call))
        .await
        .expect("the call ended by its idle deadline, not held by the server");
    let error = ended.expect_err("the update is never acknowledged");
    let (task_id, reason) = given_up(&error);
    assert!(
        reason.contains("the deadline passed"),
        "given up by the idle deadline: {reason}"
    );
    assert_eq!(
        peer.log(),
        [
            format!("created {task_id}"),
            format!(r#"updated {task_id} ["confirm-1"]"#),
            format!("cancelled {task_id}"),
        ]
    );
    connection.close().await;
}
