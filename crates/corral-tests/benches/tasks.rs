//! What the MCP Tasks extension costs a `run` of `corral mcp serve`, over
//! HTTP (the server in process, each request a new connection, as the tests
//! make them), measured in one run with the contenders alternating:
//! - *quick*: `run` of `true`, the request declaring the extension or not:
//!   a quick run is answered directly either way, so this is what offering
//!   tasks costs every call (the run moved into a task of its own, a
//!   channel back);
//! - *long*: `run` of `sleep 0.5` with the task window at 200 ms: answered
//!   directly when the request did not declare the extension, against the
//!   time a client that declared it takes to get the result (the task,
//!   then `tasks/get` at the `pollIntervalMs` the server suggests, 500 ms,
//!   until it is `completed`): what a task adds is the polling's
//!   granularity, not work.
//!
//! `cargo bench -p corral-tests --bench tasks` (`--rounds N` or
//! `CORRAL_BENCH_ROUNDS`: long rounds, quick ones 10 times as many;
//! `--quick`: 4).

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use corral_mcp::serve::{
    CorralServer, Principal, Runner, ServeOptions,
    transport::{self, Client, HttpAuth},
};
use corral_tests::bench::{
    Knobs, machine_line, median, ms, p90, ratio, run_checked, timing_row, write_results,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "bench-token-0123456789";
/// No call may take longer than this; one that does fails the bench.
const BOUND: Duration = Duration::from_secs(30);

/// One stateless (2026-07-28) request; its JSON-RPC answer.
async fn rpc(url: &str, method: &str, mut params: Value, tasks: bool) -> Result<Value, String> {
    let capabilities = if tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
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
        .unwrap_or_default()
        .to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let send = async {
        reqwest::Client::new()
            .post(url)
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header("mcp-name", name)
            .body(body.to_string())
            .send()
            .await?
            .text()
            .await
    };
    let text = tokio::time::timeout(BOUND, send)
        .await
        .map_err(|_| format!("{method}: no answer within {BOUND:?}"))?
        .map_err(|e| format!("{method}: {e}"))?;
    serde_json::from_str::<Value>(&text)
        .ok()
        .or_else(|| {
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|value| value.get("id").is_some())
        })
        .ok_or_else(|| format!("{method}: no JSON-RPC answer in {text:?}"))
}

/// A `run` of `argv` to its result, with or without the extension; the
/// time it took, and whether a task carried it.
async fn call(url: &str, argv: &[&str], tasks: bool) -> Result<(Duration, bool), String> {
    let started = Instant::now();
    let answer = rpc(
        url,
        "tools/call",
        json!({"name": "run", "arguments": {"argv": argv}}),
        tasks,
    )
    .await?;
    let result = &answer["result"];
    if result["resultType"] != "task" {
        if result["structuredContent"]["outcome"] != "exited" {
            return Err(format!("not exited: {answer}"));
        }
        return Ok((started.elapsed(), false));
    }
    let id = result["taskId"].as_str().ok_or("no task id")?.to_owned();
    loop {
        let poll = result["pollIntervalMs"].as_u64().unwrap_or(500);
        tokio::time::sleep(Duration::from_millis(poll)).await;
        let got = rpc(url, "tasks/get", json!({"taskId": id}), true).await?;
        match got["result"]["status"].as_str() {
            Some("working") => {}
            Some("completed") => {
                if got["result"]["result"]["structuredContent"]["outcome"] != "exited" {
                    return Err(format!("not exited: {got}"));
                }
                return Ok((started.elapsed(), true));
            }
            _ => return Err(format!("task: {got}")),
        }
        if started.elapsed() > BOUND {
            return Err(format!("the task still works after {BOUND:?}"));
        }
    }
}

async fn bench(rounds: usize) -> ExitCode {
    let root = corral_tests::Scratch::new("bench-tasks");
    let mut options = ServeOptions::default();
    options.roots = vec![root.0.clone()];
    options.task_window = Some(Duration::from_millis(200));
    let runner = match Runner::new(options) {
        Ok(runner) => runner,
        Err(error) => {
            eprintln!("the server did not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let listener = match transport::listen("127.0.0.1:0".parse().expect("an address")) {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("bind: {error}");
            return ExitCode::FAILURE;
        }
    };
    let url = format!(
        "http://{}{}",
        listener.local_addr().expect("its address"),
        transport::PATH
    );
    let stop = CancellationToken::new();
    tokio::spawn(transport::http(
        CorralServer::new(runner.clone()),
        listener,
        HttpAuth::with_clients(vec![Client::new(Principal::new("bench"), TOKEN)]),
        stop.clone(),
    ));

    // (name, argv, declared, answered as a task)
    let contenders: [(&str, &[&str], bool, bool); 4] = [
        ("quick run, not declared", &["true"], false, false),
        ("quick run, declared", &["true"], true, false),
        (
            "long run, not declared (direct)",
            &["sleep", "0.5"],
            false,
            false,
        ),
        (
            "long run, declared (a task, polled)",
            &["sleep", "0.5"],
            true,
            true,
        ),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); contenders.len()];
    let mut failures = 0;
    for round in 0..rounds * 10 + 5 {
        for k in 0..contenders.len() {
            let i = (round + k) % contenders.len();
            let (name, argv, declared, as_task) = contenders[i];
            // The long contenders run once every ten rounds.
            if (as_task || argv[0] == "sleep") && round % 10 != 0 {
                continue;
            }
            match call(&url, argv, declared).await {
                Ok((_, task)) if task != as_task => {
                    eprintln!("{name}: answered as a task: {task}, expected {as_task}");
                    failures += 1;
                }
                Ok((took, _)) if round >= 5 => samples[i].push(took),
                Ok(_) => {}
                Err(error) => {
                    eprintln!("{name}: {error}");
                    failures += 1;
                }
            }
        }
    }
    stop.cancel();
    runner.shutdown().await;

    println!("{}", machine_line());
    println!("\nthe Tasks extension over HTTP, interleaved, after 5 warm-up rounds\n");
    println!("| contender | n | median (ms) | p90 (ms) | median ratio |");
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (pair, base) in [(0..2, 0), (2..4, 2)] {
        for i in pair {
            let s = &samples[i];
            println!(
                "| {} | {} | {} | {} | {:.2}x |",
                contenders[i].0,
                s.len(),
                ms(median(s)),
                ms(p90(s)),
                ratio(median(s), median(&samples[base]))
            );
            rows.push(timing_row(contenders[i].0, s, &samples[base]));
        }
    }
    let failures = failures + usize::from(write_results("tasks", rows).is_err());
    println!("failures: {failures}");
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    corral::watchdog::hook();
    let rounds = Knobs::from_env().rounds_or(20, 4);
    let code = run_checked(bench(rounds));
    corral::watchdog::shutdown();
    code
}
