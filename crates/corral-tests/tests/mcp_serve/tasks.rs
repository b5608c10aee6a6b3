//! Long runs as MCP tasks (the Tasks extension, SEP-2663) over HTTP: a run
//! not done within the task window is answered with a task that outlives
//! the connection that started it; its owner gets the result with
//! `tasks/get` from a new connection, another client is told it is unknown,
//! `tasks/cancel` ends its whole tree, and a request that did not declare
//! the extension is answered directly.

use std::time::{Duration, Instant};

use corral_mcp::serve::{
    CorralServer, Principal, Runner, ServeOptions,
    transport::{self, Client, HttpAuth},
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::harness::{assert_gone, options, record, recorded};

pub(crate) const ALICE: &str = "alice-token-0123456789";
pub(crate) const BOB: &str = "bob-token-9876543210";
const TASKS: &str = "io.modelcontextprotocol/tasks";

pub(crate) struct Server {
    pub(crate) url: String,
    stop: CancellationToken,
    pub(crate) runner: Runner,
    pub(crate) root: corral_tests::Scratch,
}

impl Server {
    pub(crate) fn start(name: &str, change: impl FnOnce(&mut ServeOptions)) -> Self {
        let root = corral_tests::Scratch::new(name);
        let mut options = options(&root);
        options.task_window = Some(Duration::from_millis(300));
        change(&mut options);
        let runner = Runner::new(options).expect("a runner");
        let listener = transport::listen("127.0.0.1:0".parse().expect("address")).expect("bind");
        let url = format!(
            "http://{}{}",
            listener.local_addr().expect("address"),
            transport::PATH
        );
        let auth = HttpAuth::with_clients(vec![
            Client::new(Principal::new("alice"), ALICE),
            Client::new(Principal::new("bob"), BOB),
        ]);
        let stop = CancellationToken::new();
        tokio::spawn(transport::http(
            CorralServer::new(runner.clone()),
            listener,
            auth,
            stop.clone(),
        ));
        Self {
            url,
            stop,
            runner,
            root,
        }
    }

    /// One stateless (2026-07-28) request of `method` as the client with
    /// `token`, on a connection of its own (a new client each time); its
    /// JSON-RPC answer. `tasks` declares the Tasks extension.
    pub(crate) async fn rpc(
        &self,
        token: &str,
        method: &str,
        mut params: Value,
        tasks: bool,
    ) -> Value {
        let capabilities = if tasks {
            json!({"extensions": {TASKS: {}}})
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let name = params
            .get("name")
            .or_else(|| params.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut request = reqwest::Client::new()
            .post(&self.url)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let send = async {
            let response = request.body(body.to_string()).send().await?;
            response.text().await
        };
        let text = tokio::time::timeout(Duration::from_secs(30), send)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer within 30 s"))
            .unwrap_or_else(|error| panic!("{method}: {error}"));
        answer_in(&text).unwrap_or_else(|| panic!("{method}: no JSON-RPC answer in {text:?}"))
    }

    /// Waits until the three members a `member` tree records (in `pids`)
    /// run, cancels task `id` as ALICE, and waits for its end: the members
    /// and the task's last state, `cancelled` (asserted).
    pub(crate) async fn cancel_once_started(
        &self,
        id: &str,
        pids: &std::path::Path,
    ) -> (Vec<corral_tests::Proc>, Value) {
        let started = Instant::now();
        while recorded(pids).len() < 3 {
            assert!(started.elapsed() < Duration::from_secs(20), "never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let procs = recorded(pids);
        let ack = self
            .rpc(ALICE, "tasks/cancel", json!({"taskId": id}), true)
            .await;
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
        let done = self.until_done(ALICE, id).await;
        assert_eq!(done["status"], "cancelled", "{done}");
        (procs, done)
    }

    /// Polls `tasks/get` of `id` as `token` until the task is no longer
    /// `working`; its last state.
    pub(crate) async fn until_done(&self, token: &str, id: &str) -> Value {
        let started = Instant::now();
        loop {
            let got = self
                .rpc(token, "tasks/get", json!({"taskId": id}), true)
                .await;
            let result = &got["result"];
            assert_eq!(result["resultType"], "complete", "{got}");
            if result["status"] != "working" {
                return result.clone();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the task still works after 60 s: {got}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// The JSON-RPC answer in a response body: plain JSON, or the `data:` line
/// of a server-sent event that has an `id`.
fn answer_in(text: &str) -> Option<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Some(value);
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|value| value.get("id").is_some())
}

/// A member script for the server's runs (`sh MEMBER [ignore]`: records
/// its identity in the file returned, ignoring `SIGTERM` with `ignore`,
/// then waits), and the file.
pub(crate) fn member(server: &Server) -> (std::path::PathBuf, String) {
    let pids = server.root.path("pids");
    let member = server.root.path("member.sh");
    std::fs::write(
        &member,
        format!(
            "[ \"$1\" = ignore ] && trap '' TERM\n{}\nwhile :; do sleep 1; done\n",
            record("$$", &pids)
        ),
    )
    .expect("member.sh");
    (pids, member.display().to_string())
}

/// A script that prints, says it started, waits for `go`, prints again.
fn waits_for_go(server: &Server) -> String {
    format!(
        "echo first-line; touch {}; while [ ! -e {} ]; do sleep 0.05; done; echo last-line",
        server.root.path("started").display(),
        server.root.path("go").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_run_becomes_a_task_that_outlives_its_connection_and_only_its_owner_reads() {
    let server = Server::start("serve-task-outlives", |_| {});
    let call =
        json!({"name": "run", "arguments": {"shell": waits_for_go(&server), "timeout": "60s"}});
    let answer = server.rpc(ALICE, "tools/call", call, true).await;
    let task = &answer["result"];
    assert_eq!(task["resultType"], "task", "{answer}");
    assert_eq!(task["status"], "working", "{answer}");
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    let hex = id.strip_prefix("task-").expect("task-HEX");
    assert!(
        hex.len() == 32 && hex.chars().all(|c| c.is_ascii_hexdigit()),
        "128 random bits: {id}"
    );
    assert!(task["pollIntervalMs"].as_u64().is_some(), "{answer}");
    assert!(
        task["ttlMs"].as_u64().expect("a TTL") >= 3_600_000,
        "an hour after the run's end: {answer}"
    );
    // The connection that started it is gone; the run goes on.
    assert!(server.root.path("started").exists(), "the run started");
    let working = server
        .rpc(ALICE, "tasks/get", json!({"taskId": id}), true)
        .await;
    assert_eq!(working["result"]["status"], "working", "{working}");
    // Bob is told what an id that never existed gets.
    let bobs = server
        .rpc(BOB, "tasks/get", json!({"taskId": id}), true)
        .await;
    let never = server
        .rpc(BOB, "tasks/get", json!({"taskId": "task-0"}), true)
        .await;
    assert_eq!(bobs["error"]["code"], -32602, "{bobs}");
    assert_eq!(bobs["error"]["code"], never["error"]["code"]);
    let cancel = server
        .rpc(BOB, "tasks/cancel", json!({"taskId": id}), true)
        .await;
    assert!(cancel.get("error").is_some(), "bob cancelled it: {cancel}");

    std::fs::write(server.root.path("go"), "").expect("go");
    let done = server.until_done(ALICE, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"]["structuredContent"];
    assert_eq!(result["outcome"], "exited", "{done}");
    let stdout = result["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.contains("first-line") && stdout.contains("last-line"),
        "the whole output: {done}"
    );
    assert_eq!(server.runner.tasks_kept(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_ends_the_whole_tree() {
    let server = Server::start("serve-task-cancel", |_| {});
    let (pids, m) = member(&server);
    let script = format!("sh {m} bg & setsid sh {m} setsid & sh {m} ignore & wait");
    let call = json!({"name": "run", "arguments": {"shell": script, "timeout": "60s", "kill_after": "300ms"}});
    let answer = server.rpc(ALICE, "tools/call", call, true).await;
    let id = answer["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned();
    let (procs, done) = server.cancel_once_started(&id, &pids).await;
    let said = done["statusMessage"].as_str().unwrap_or_default();
    assert!(said.starts_with("effects unknown: "), "{done}");
    assert!(said.contains("tree was ended"), "{done}");
    assert_gone(&procs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_did_not_declare_tasks_is_answered_directly() {
    let server = Server::start("serve-task-undeclared", |_| {});
    let call =
        json!({"name": "run", "arguments": {"shell": "sleep 0.8; echo done", "timeout": "60s"}});
    let answer = server.rpc(ALICE, "tools/call", call.clone(), false).await;
    assert_ne!(answer["result"]["resultType"], "task", "{answer}");
    assert_eq!(
        answer["result"]["structuredContent"]["outcome"], "exited",
        "{answer}"
    );
    // Declared, but the server was told never to.
    let never = Server::start("serve-task-never", |options| options.task_window = None);
    let answer = never.rpc(ALICE, "tools/call", call, true).await;
    assert_eq!(
        answer["result"]["structuredContent"]["outcome"], "exited",
        "{answer}"
    );
    // A quick run is answered directly even when declared.
    let quick = json!({"name": "run", "arguments": {"argv": ["echo", "quick"]}});
    let answer = server.rpc(ALICE, "tools/call", quick, true).await;
    assert_eq!(
        answer["result"]["structuredContent"]["outcome"], "exited",
        "{answer}"
    );
    assert_eq!(server.runner.tasks_kept(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_shutdown_ends_a_tasks_tree() {
    let server = Server::start("serve-task-shutdown", |_| {});
    let (pids, m) = member(&server);
    let script = format!("setsid sh {m} setsid & sh {m} ignore & wait");
    let call = json!({"name": "run", "arguments": {"shell": script, "timeout": "60s", "kill_after": "300ms"}});
    let answer = server.rpc(ALICE, "tools/call", call, true).await;
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
    let started = Instant::now();
    while recorded(&pids).len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(20), "never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let procs = recorded(&pids);
    tokio::time::timeout(Duration::from_secs(30), server.runner.shutdown())
        .await
        .expect("the shutdown ends within 30 s");
    assert_gone(&procs);
}

/// Under protocol 2025-11-25 a long run is answered directly, even for a
/// client that names the extension in its `initialize` capabilities and in
/// the request's: such clients know only that version's own tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_is_never_answered_with_a_task() {
    let server = Server::start("serve-task-legacy", |_| {});
    let post = |session: Option<&str>, body: Value| {
        let mut request = reqwest::Client::new()
            .post(&server.url)
            .header("authorization", format!("Bearer {ALICE}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.body(body.to_string()).send()
    };
    let made = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {TASKS: {}}},
            "clientInfo": {"name": "t", "version": "0"}}}),
    )
    .await
    .expect("initialize");
    let session = made
        .headers()
        .get("mcp-session-id")
        .and_then(|id| id.to_str().ok())
        .expect("a session id")
        .to_owned();
    made.text().await.expect("the initialize answer");
    post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .expect("initialized");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run", "arguments": {"shell": "sleep 0.8; echo done"},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}}}});
    let text = tokio::time::timeout(Duration::from_secs(30), async {
        post(Some(&session), call).await?.text().await
    })
    .await
    .expect("answered within 30 s")
    .expect("an answer");
    let answer = answer_in(&text).unwrap_or_else(|| panic!("no answer in {text:?}"));
    assert_eq!(
        answer["result"]["structuredContent"]["outcome"], "exited",
        "{answer}"
    );
    assert_eq!(server.runner.tasks_kept(), 0);
}
