//! The cost of a `run` through `corral mcp serve`, measured in one run:
//! an rmcp client calls `tools/call run {"argv":["true"]}` on a served
//! [`Runner`] (in process, over `tokio::io::duplex`, as the serve tests
//! connect them) and waits for the result, against a direct spawn of `true`
//! through the library with the same backend and stdio (three pipes, output
//! read to the end), and, as a diagnostic, `Runner::call` with no transport.
//! The contenders alternate call by call, the order rotating every round.
//!
//! `cargo bench -p corral-mcp --bench serve` (`--rounds N` or
//! `CORRAL_BENCH_ROUNDS`; `--quick`: 30 rounds).

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

use corral::{Backend, BackendChoice, Outcome, Stdio};
use corral_mcp::serve::{CallContext, CorralServer, Runner, ServeOptions};
use corral_tests::bench::{
    Knobs, corral_backends, machine_line, median, ms, ms_f64, p90, ratio, run_checked, timing_row,
    write_results,
};
use rmcp::{RoleClient, ServiceExt, model::CallToolRequestParams, service::RunningService};
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;

const WARM_UP: usize = 30;
/// No call may take longer than this; one that does fails the bench.
const BOUND: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Contender {
    Direct,
    Runner,
    Mcp,
}

impl Contender {
    fn name(self) -> &'static str {
        match self {
            Contender::Direct => "direct spawn (corral::Command, piped)",
            Contender::Runner => "(diag) Runner::call, no transport",
            Contender::Mcp => "run through MCP (rmcp client, in-process pipe)",
        }
    }
}

/// A served runner and an rmcp client connected to it.
struct Served {
    client: RunningService<RoleClient, ()>,
    runner: Runner,
}

async fn serve(backend: Backend, root: &corral_tests::Scratch) -> Result<Served, String> {
    let mut options = ServeOptions::default();
    options.roots = vec![root.0.clone()];
    options.backend = BackendChoice::Only(backend);
    let runner = Runner::new(options).map_err(|e| e.to_string())?;
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let server = CorralServer::new(runner.clone());
    tokio::spawn(async move {
        if let Ok(service) = server.serve(server_io).await {
            let _ = service.waiting().await;
        }
    });
    let client = ().serve(client_io).await.map_err(|e| e.to_string())?;
    Ok(Served { client, runner })
}

fn true_args() -> Map<String, Value> {
    let mut args = Map::new();
    args.insert("argv".to_owned(), json!(["true"]));
    args
}

fn check_structured(structured: Option<&Value>) -> Result<(), String> {
    match structured {
        Some(value) if value["outcome"] == "exited" && value["exit_code"] == 0 => Ok(()),
        other => Err(format!("unexpected result: {other:?}")),
    }
}

/// What the server does around the command, minus the server: the same
/// stdio (three pipes), stdin closed at once, both outputs read to the end.
async fn direct(backend: Backend) -> Result<(), String> {
    let mut child = corral::Command::new("true")
        .backend(BackendChoice::Only(backend))
        .stdin(Stdio::Piped)
        .stdout(Stdio::Piped)
        .stderr(Stdio::Piped)
        .timeout(corral_mcp::serve::DEFAULT_TIMEOUT)
        .spawn()
        .map_err(|e| e.to_string())?;
    drop(child.take_stdin());
    let (mut stdout, mut stderr) = (child.take_stdout(), child.take_stderr());
    let read = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut out).await;
        }
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_end(&mut err).await;
        }
    };
    let (finished, ()) = tokio::join!(child.wait(), read);
    let finished = finished.map_err(|e| e.to_string())?;
    if finished.outcome != (Outcome::Exited { code: 0 }) {
        return Err(format!("{:?}", finished.outcome));
    }
    Ok(())
}

async fn once(contender: Contender, backend: Backend, served: &Served) -> Result<Duration, String> {
    let started = Instant::now();
    let work = async {
        match contender {
            Contender::Direct => direct(backend).await,
            Contender::Runner => {
                let result = served
                    .runner
                    .call("run", true_args(), CallContext::default())
                    .await;
                check_structured(result.structured_content.as_ref())
            }
            Contender::Mcp => {
                let params = CallToolRequestParams::new("run").with_arguments(true_args());
                let result = served
                    .client
                    .peer()
                    .call_tool(params)
                    .await
                    .map_err(|e| e.to_string())?;
                check_structured(result.structured_content.as_ref())
            }
        }
    };
    match tokio::time::timeout(BOUND, work).await {
        Ok(Ok(())) => Ok(started.elapsed()),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(format!("no answer within {BOUND:?}")),
    }
}

async fn bench(rounds: usize) -> ExitCode {
    let Some(&backend) = corral_backends().first() else {
        println!("SKIPPED: no corral backend is available here");
        return ExitCode::SUCCESS;
    };
    let root = corral_tests::Scratch::new("bench-serve");
    let served = match serve(backend, &root).await {
        Ok(served) => served,
        Err(error) => {
            eprintln!("the server did not start: {error}");
            return ExitCode::FAILURE;
        }
    };
    let contenders = [Contender::Direct, Contender::Runner, Contender::Mcp];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); contenders.len()];
    let mut failures = 0;
    for round in 0..WARM_UP + rounds {
        for k in 0..contenders.len() {
            let i = (round + k) % contenders.len();
            match once(contenders[i], backend, &served).await {
                Ok(took) if round >= WARM_UP => samples[i].push(took),
                Ok(_) => {}
                Err(error) => {
                    eprintln!("{}: {error}", contenders[i].name());
                    failures += 1;
                }
            }
        }
    }
    let _ = served.client.cancel().await;
    served.runner.shutdown().await;

    println!("{}", machine_line());
    println!(
        "\n`run` of `true`, backend {backend}, {rounds} interleaved rounds after {WARM_UP} warm-up\n"
    );
    println!("| contender | n | median (ms) | p90 (ms) | median ratio | p90 ratio |");
    println!("|---|---|---|---|---|---|");
    let base = &samples[0];
    for (contender, s) in contenders.iter().zip(&samples) {
        println!(
            "| {} | {} | {} | {} | {:.2}x | {:.2}x |",
            contender.name(),
            s.len(),
            ms(median(s)),
            ms(p90(s)),
            ratio(median(s), median(base)),
            ratio(p90(s), p90(base))
        );
    }
    let mcp = &samples[2];
    // Signed: under load a p90 through the server can come out below the
    // direct one.
    let added = ms_f64(median(mcp)) - ms_f64(median(base));
    let added_p90 = ms_f64(p90(mcp)) - ms_f64(p90(base));
    let transport = ms_f64(median(mcp)) - ms_f64(median(&samples[1]));
    println!(
        "\nadded by the server (median): {added:+.3} ms ({:.2}x); p90: {added_p90:+.3} ms; \
         of which the JSON-RPC transport and rmcp (MCP - Runner::call): {transport:+.3} ms",
        ratio(median(mcp), median(base)),
    );
    let mut rows: Vec<Value> = contenders
        .iter()
        .zip(&samples)
        .map(|(contender, s)| timing_row(contender.name(), s, base))
        .collect();
    rows.push(json!({
        "backend": backend.to_string(),
        "added_median_ms": added,
        "added_p90_ms": added_p90,
        "ratio_median": ratio(median(mcp), median(base)),
        "transport_median_ms": transport,
    }));
    let failures = failures + usize::from(write_results("serve", rows).is_err());
    println!("failures: {failures}");
    if failures > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

fn main() -> ExitCode {
    // This binary serves as its own watchdog, so both contenders carry the
    // default guard (ledger and watchdog), as `corral mcp serve` does.
    corral::watchdog::hook();
    let rounds = Knobs::from_env().rounds_or(300, 30);
    let code = run_checked(bench(rounds));
    corral::watchdog::shutdown();
    code
}
