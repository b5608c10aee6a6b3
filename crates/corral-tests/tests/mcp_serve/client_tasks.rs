//! corral's own client (`corral_mcp::client`) following the server's tasks
//! over HTTP: a call that becomes a task ends with the run's result; a
//! dropped call cancels its task (the server ends the tree); another token
//! is told the task is unknown; a connection cut by a proxy the test
//! controls is resumed, and the call still ends with the real outcome.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use corral_mcp::client::{
    CallError, CallOptions, ConnectOptions, Connection, HttpOptions, Manager, OnTask,
    Server as Target, TaskEnd, task_of,
};
use serde_json::json;
use tokio::{
    net::{TcpListener, TcpStream},
    task::AbortHandle,
};

use super::tasks::{ALICE, BOB, Server, member};
use crate::harness::{args, assert_gone, record, recorded, structured};

const LIMIT: Duration = Duration::from_secs(60);

fn tasks_on() -> ConnectOptions {
    let mut options = ConnectOptions::default();
    options.tasks = true;
    options
}

fn as_client(token: &str) -> HttpOptions {
    HttpOptions::default().header("authorization", format!("Bearer {token}"))
}

/// Call options with a hard deadline that keep the task's id in `id`.
fn noting(id: &Arc<Mutex<Option<String>>>) -> CallOptions {
    let mut options = CallOptions::timeout(LIMIT);
    let id = id.clone();
    options.on_task = Some(OnTask::new(move |task| {
        *id.lock().expect("lock") = Some(task.to_owned());
    }));
    options
}

/// Waits (asynchronously) until `ready`, failing after `LIMIT`.
async fn until(what: &str, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A script that records its identity in `pids`, prints, says it started,
/// waits for `go`, prints again.
fn recorded_run(server: &Server) -> String {
    format!(
        "{}; echo first-line; touch {}; while [ ! -e {} ]; do sleep 0.05; done; echo last-line",
        record("$$", &server.root.path("pids")),
        server.root.path("started").display(),
        server.root.path("go").display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_becomes_a_task_ends_with_the_runs_result() {
    let server = Server::start("client-task-result", |_| {});
    let connection = Connection::http(&server.url, as_client(ALICE), tasks_on())
        .await
        .expect("connected");
    let shell = "echo first-line; sleep 1; echo last-line";
    let result = connection
        .call_tool(
            "run",
            Some(args(json!({"shell": shell, "timeout": "60s"}))),
            &CallOptions::timeout(LIMIT),
        )
        .await
        .expect("the run's result");
    let task = task_of(&result).expect("the result names its task");
    assert!(task.starts_with("task-"), "{task}");
    let done = structured(&result);
    assert_eq!(done["outcome"], "exited", "{done}");
    assert_eq!(done["stdout"], "first-line\nlast-line\n", "{done}");
    assert_eq!(server.runner.tasks_kept(), 1, "it ran as a task");
    // Read again by id, it is the same result.
    let again = connection
        .read_task(task, &CallOptions::timeout(LIMIT))
        .await
        .expect("read again");
    assert_eq!(structured(&again)["stdout"], done["stdout"]);
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_cancels_its_task_and_the_server_ends_the_tree() {
    let server = Server::start("client-task-dropped", |_| {});
    let connection = Arc::new(
        Connection::http(&server.url, as_client(ALICE), tasks_on())
            .await
            .expect("connected"),
    );
    let (pids, m) = member(&server);
    let script = format!("sh {m} bg & sh {m} ignore & wait");
    let id = Arc::new(Mutex::new(None));
    let options = noting(&id);
    let caller = connection.clone();
    let call = tokio::spawn(async move {
        let arguments = json!({"shell": script, "timeout": "60s", "kill_after": "300ms"});
        caller
            .call_tool("run", Some(args(arguments)), &options)
            .await
    });
    until(
        "the run's members started and the call follows its task",
        || recorded(&pids).len() >= 2 && id.lock().expect("lock").is_some(),
    )
    .await;
    let procs = recorded(&pids);
    call.abort();
    assert!(call.await.is_err(), "the call was dropped, not finished");
    // The connection lives on: only the dropped call's tasks/cancel can end
    // the run before its 60 s timeout.
    until("the tree is gone", || procs.iter().all(|p| !p.is_alive())).await;
    assert_gone(&procs);
    let task = id.lock().expect("lock").clone().expect("a task id");
    // The task's record says so once the server saw its run end.
    let started = Instant::now();
    let read = loop {
        let read = connection
            .read_task(&task, &CallOptions::timeout(LIMIT))
            .await;
        match &read {
            Err(CallError::Task {
                end: TaskEnd::Working,
                ..
            }) if started.elapsed() < LIMIT => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => break read,
        }
    };
    assert!(
        matches!(
            &read,
            Err(CallError::Task {
                end: TaskEnd::Cancelled,
                ..
            })
        ),
        "{read:?}"
    );
    connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_token_is_told_the_task_is_unknown() {
    let server = Server::start("client-task-other-token", |_| {});
    let alice = Connection::http(&server.url, as_client(ALICE), tasks_on())
        .await
        .expect("alice");
    let id = Arc::new(Mutex::new(None));
    let shell = recorded_run(&server);
    let options = noting(&id);
    let call = alice.call_tool(
        "run",
        Some(args(json!({"shell": shell, "timeout": "60s"}))),
        &options,
    );
    let other = async {
        until("the call is a task", || id.lock().expect("lock").is_some()).await;
        let task = id.lock().expect("lock").clone().expect("a task id");
        let bob = Connection::http(&server.url, as_client(BOB), tasks_on())
            .await
            .expect("bob");
        let read = bob.read_task(&task, &CallOptions::timeout(LIMIT)).await;
        let cancel = bob.cancel_task(&task, &CallOptions::timeout(LIMIT)).await;
        bob.close().await;
        std::fs::write(server.root.path("go"), "").expect("go");
        (read, cancel)
    };
    let (result, (read, cancel)) = tokio::join!(call, other);
    assert!(
        matches!(&read, Err(CallError::Rpc { code: -32602, message, .. }) if message.contains("unknown task")),
        "{read:?}"
    );
    assert!(
        matches!(&cancel, Err(CallError::Rpc { code: -32602, .. })),
        "{cancel:?}"
    );
    // Bob's cancel did nothing: Alice's run ended as it would have.
    let result = result.expect("alice's result");
    assert_eq!(structured(&result)["outcome"], "exited");
    alice.close().await;
}

/// A TCP proxy the test controls: it forwards every connection to
/// `upstream` until [`Proxy::cut`], which closes every connection and, for
/// a while, every new one at once.
struct Proxy {
    addr: SocketAddr,
    cutting: Arc<AtomicBool>,
    live: Arc<AtomicUsize>,
    refused: Arc<AtomicUsize>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

/// Counts a forwarded connection while it lives.
struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Proxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let cutting = Arc::new(AtomicBool::new(false));
        let live = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let (c, l, r, k) = (
            cutting.clone(),
            live.clone(),
            refused.clone(),
            links.clone(),
        );
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if c.load(Ordering::SeqCst) {
                    r.fetch_add(1, Ordering::SeqCst);
                    drop(inbound);
                    continue;
                }
                l.fetch_add(1, Ordering::SeqCst);
                let counted = Live(l.clone());
                let link = tokio::spawn(async move {
                    let _counted = counted;
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                k.lock().expect("lock").push(link.abort_handle());
            }
        })
        .abort_handle();
        Self {
            addr,
            cutting,
            live,
            refused,
            links,
            accept,
        }
    }

    /// Closes every connection, and every new one for `outage`.
    async fn cut(&self, outage: Duration) {
        self.cutting.store(true, Ordering::SeqCst);
        for link in self.links.lock().expect("lock").drain(..) {
            link.abort();
        }
        tokio::time::sleep(outage).await;
        self.cutting.store(false, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        for link in self.links.lock().expect("lock").drain(..) {
            link.abort();
        }
    }
}

/// Regression: a poll of a task that got no answer ended the call as
/// unknown although the run went on and its result was there to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_connection_is_resumed_and_the_call_ends_with_the_real_outcome() {
    let server = Server::start("client-task-resume", |_| {});
    let upstream: SocketAddr = server
        .url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .and_then(|authority| authority.parse().ok())
        .expect("the server's address");
    let proxy = Proxy::start(upstream).await;
    let path = server.url.splitn(4, '/').nth(3).expect("the path");
    let url = format!("http://{}/{path}", proxy.addr);
    let manager = Manager::new();
    let target = Target::Http {
        url,
        options: as_client(ALICE),
    };
    manager
        .connect("corral", target, tasks_on())
        .await
        .expect("connected through the proxy");
    let id = Arc::new(Mutex::new(None));
    let shell = recorded_run(&server);
    let options = noting(&id);
    let call = manager.call_tool(
        "corral",
        "run",
        Some(args(json!({"shell": shell, "timeout": "60s"}))),
        &options,
    );
    let cut = async {
        until("the run started as a task", || {
            server.root.path("started").exists() && id.lock().expect("lock").is_some()
        })
        .await;
        // Longer than the server's poll interval (500 ms), so a poll meets
        // the cut; shorter than the shortest three backoffs in a row
        // (100 + 200 + 400 ms), so the budget outlasts it.
        proxy.cut(Duration::from_millis(600)).await;
        std::fs::write(server.root.path("go"), "").expect("go");
    };
    let (result, ()) = tokio::join!(call, cut);
    assert!(
        proxy.refused.load(Ordering::SeqCst) > 0,
        "no poll met the cut: the test proved nothing"
    );
    let result = result.expect("the run's real outcome, not unknown");
    let done = structured(&result);
    assert_eq!(done["outcome"], "exited", "{done}");
    assert_eq!(done["stdout"], "first-line\nlast-line\n", "{done}");
    assert_eq!(
        task_of(&result),
        id.lock().expect("lock").as_deref(),
        "the task it followed"
    );
    manager.shutdown().await;
    assert_eq!(manager.live_tasks(), 0, "the client runtime's tasks");
    assert_gone(&recorded(&server.root.path("pids")));
    until("the proxy's connections are closed", || {
        proxy.live.load(Ordering::SeqCst) == 0
    })
    .await;
}
