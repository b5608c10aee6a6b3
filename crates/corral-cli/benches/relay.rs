//! What the guard costs: round-trip latency of a small request sent straight
//! to a trivial echo server vs through `corral mcp wrap`, interleaved in one
//! run, and the throughput of small messages through the guard.
//!
//! Run: `cargo bench -p corral-cli --bench relay` (add `-- --quick` for a
//! short run). The echo server is this binary re-entered with
//! `CORRAL_MCP_BENCH_ECHO=1`: it answers every request line with
//! `{"jsonrpc":"2.0","id":ID,"result":{}}`.

use std::{
    io::{BufRead, BufReader, BufWriter, Write},
    os::fd::AsFd,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

const ECHO_ENV: &str = "CORRAL_MCP_BENCH_ECHO";

fn main() {
    if std::env::var_os(ECHO_ENV).is_some() {
        echo_server();
        return;
    }
    let quick = std::env::args().any(|arg| arg == "--quick");
    let (samples, messages) = if quick {
        (2_000, 50_000)
    } else {
        (10_000, 200_000)
    };
    let exe = std::env::current_exe().expect("this benchmark's path");
    let corral = env!("CARGO_BIN_EXE_corral");

    let mut direct = Peer::start(Command::new(&exe));
    let mut guarded = Peer::start({
        let mut command = Command::new(corral);
        command.args(["mcp", "wrap", "--"]).arg(&exe);
        command
    });

    // Round trips, interleaved one by one after a warm-up.
    for id in 0..500 {
        direct.round_trip(id);
        guarded.round_trip(id);
    }
    let (mut straight, mut through) = (Vec::new(), Vec::new());
    for id in 0..samples {
        straight.push(direct.round_trip(id));
        through.push(guarded.round_trip(id));
    }
    let (d, g) = (median(&mut straight), median(&mut through));
    let (d90, g90) = (percentile(&straight, 0.9), percentile(&through, 0.9));

    // Throughput: pipelined requests, answers read concurrently.
    let direct_rate = direct.throughput(messages);
    let guard_rate = guarded.throughput(messages);
    direct.stop();
    guarded.stop();

    println!(
        "corral-mcp relay benchmark ({samples} round trips each, {messages} pipelined messages)"
    );
    println!("| measure | direct | through the guard | added |");
    println!("|---|---|---|---|");
    println!(
        "| median round trip | {} | {} | {} |",
        micros(d),
        micros(g),
        micros(g.saturating_sub(d))
    );
    println!(
        "| p90 round trip | {} | {} | {} |",
        micros(d90),
        micros(g90),
        micros(g90.saturating_sub(d90))
    );
    println!("| throughput (small messages/s) | {direct_rate:.0} | {guard_rate:.0} | |");
    let added = g.saturating_sub(d);
    println!(
        "targets: added median round trip <= 100 us: {}; throughput >= 50000/s: {}",
        if added <= Duration::from_micros(100) {
            "met"
        } else {
            "MISSED"
        },
        if guard_rate >= 50_000.0 {
            "met"
        } else {
            "MISSED"
        }
    );
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let rows = vec![serde_json::json!({
        "samples": samples, "messages": messages,
        "direct_median_us": us(d), "guard_median_us": us(g), "added_median_us": us(added),
        "direct_p90_us": us(d90), "guard_p90_us": us(g90),
        "direct_msgs_per_sec": direct_rate, "guard_msgs_per_sec": guard_rate,
    })];
    if corral_tests::bench::write_results("relay", rows).is_err() {
        std::process::exit(1);
    }
}

fn micros(duration: Duration) -> String {
    format!("{:.1} µs", duration.as_secs_f64() * 1e6)
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// A server process with its pipes.
struct Peer {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Peer {
    fn start(mut command: Command) -> Self {
        let mut child = command
            .env(ECHO_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting a peer");
        let stdin = BufWriter::new(child.stdin.take().expect("stdin"));
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    fn round_trip(&mut self, id: u64) -> Duration {
        let started = Instant::now();
        writeln!(
            self.stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#
        )
        .expect("write");
        self.stdin.flush().expect("flush");
        self.line.clear();
        self.stdout.read_line(&mut self.line).expect("read");
        let took = started.elapsed();
        assert!(self.line.contains(&format!("\"id\":{id}")), "{}", self.line);
        took
    }

    /// Messages per second for `count` pipelined requests and their answers.
    fn throughput(&mut self, count: u64) -> f64 {
        let started = Instant::now();
        std::thread::scope(|scope| {
            let stdin = &mut self.stdin;
            scope.spawn(move || {
                for id in 0..count {
                    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#)
                        .expect("write");
                }
                stdin.flush().expect("flush");
            });
            let mut line = String::new();
            for _ in 0..count {
                line.clear();
                self.stdout.read_line(&mut line).expect("read");
            }
        });
        count as f64 / started.elapsed().as_secs_f64()
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// Answers each request line with an empty result, flushing when no more
/// input is buffered.
fn echo_server() {
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .expect("stdin");
    let mut input = BufReader::with_capacity(64 << 10, std::fs::File::from(fd));
    let mut output = BufWriter::new(std::io::stdout().lock());
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        let Ok(request) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        let response = serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "result": {}});
        if serde_json::to_writer(&mut output, &response).is_err()
            || output.write_all(b"\n").is_err()
        {
            break;
        }
        if input.buffer().is_empty() && output.flush().is_err() {
            break;
        }
    }
    let _ = output.flush();
}
