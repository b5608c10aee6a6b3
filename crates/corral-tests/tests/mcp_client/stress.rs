//! A thousand connects and disconnects, each cut short at a random point
//! (a dropped connect future, a cancelled token, a call past a tiny
//! deadline, a dropped handle, a manager shut down): at the end the
//! runtime's tasks are back at their baseline and no server any cycle
//! started still runs. The cycles come from a seeded PRNG: the seed is
//! printed, and `CORRAL_STRESS_SEED=N` replays the same plan (the timing of
//! the processes themselves is not replayed).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use corral_mcp::client::{
    CallError, CallOptions, ConnectError, ConnectOptions, Ended, Manager, Server,
};
use tokio_util::sync::CancellationToken;

use crate::common::{Files, assert_gone_now, fixture, message, tasks};

const CYCLES: usize = 1000;
/// Cycles in flight at once.
const CONCURRENCY: usize = 8;
/// How long the tasks may take to be back at their baseline at the end.
const SETTLE: Duration = Duration::from_secs(30);

/// xorshift64: enough randomness to pick cancellation points, replayable
/// from its seed.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // Zero is xorshift's one fixed point.
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..=max`.
    fn upto(&mut self, max: u64) -> u64 {
        self.next() % (max + 1)
    }

    fn millis(&mut self, max: u64) -> Duration {
        Duration::from_millis(self.upto(max))
    }
}

/// How one cycle ends its connection.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// The connect future is dropped after the delay.
    DropConnect(Duration),
    /// `ConnectOptions::cancel` is cancelled after the delay.
    CancelToken(Duration),
    /// Connect, then disconnect.
    Disconnect,
    /// Connect, call `echo` with this deadline, then disconnect.
    CallThenDisconnect(Duration),
    /// Connect, drop the handle, then disconnect the name.
    DropThenDisconnect,
    /// Connect through a manager of its own, then shut it down.
    Shutdown,
}

#[derive(Debug, Clone, Copy)]
struct Cycle {
    index: usize,
    /// The fixture's `--handshake-delay-ms`.
    handshake_delay: Duration,
    cut: Cut,
}

fn plan(seed: u64) -> Vec<Cycle> {
    let mut rng = XorShift::new(seed);
    (0..CYCLES)
        .map(|index| {
            let handshake_delay = rng.millis(10);
            let cut = match rng.upto(5) {
                0 => Cut::DropConnect(rng.millis(20)),
                1 => Cut::CancelToken(rng.millis(20)),
                2 => Cut::Disconnect,
                3 => Cut::CallThenDisconnect(rng.millis(3)),
                4 => Cut::DropThenDisconnect,
                _ => Cut::Shutdown,
            };
            Cycle {
                index,
                handshake_delay,
                cut,
            }
        })
        .collect()
}

fn seed() -> u64 {
    match std::env::var("CORRAL_STRESS_SEED") {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("CORRAL_STRESS_SEED is not a number: {text:?}")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|since| since.as_nanos() as u64)
            .unwrap_or(1),
    }
}

fn options() -> ConnectOptions {
    let mut options = ConnectOptions::default();
    options.discover_timeout = Duration::from_secs(10);
    options.initialize_timeout = Duration::from_secs(10);
    options.close_grace = Duration::from_millis(300);
    options.reconnect.attempts = 0;
    options
}

fn server(files: &Files, cycle: &Cycle) -> Server {
    let delay = cycle.handshake_delay.as_millis().to_string();
    Server::Stdio(
        corral::Command::new(fixture())
            .backend(corral_tests::containing_backend())
            .arg("--spawn-log")
            .arg(files.spawns())
            .args(["--handshake-delay-ms", &delay])
            .grace(Duration::from_millis(500))
            .final_bound(Duration::from_secs(2))
            .clone(),
    )
}

/// Disconnects `name` and checks the teardown says so.
async fn disconnect(manager: &Manager, name: &str, cycle: &Cycle) {
    let teardown = manager
        .disconnect(name)
        .await
        .unwrap_or_else(|error| panic!("{cycle:?}: {error}"))
        .unwrap_or_else(|| panic!("{cycle:?}: no teardown"));
    assert_eq!(teardown.ended, Ended::Disconnected, "{cycle:?}");
}

async fn run(manager: &Manager, files: &Files, cycle: Cycle) {
    let name = format!("fx-{}", cycle.index);
    let server = server(files, &cycle);
    match cycle.cut {
        Cut::DropConnect(after) => {
            let connecting = manager.connect(&name, server, options());
            if let Ok(connected) = tokio::time::timeout(after, connecting).await {
                connected.unwrap_or_else(|error| panic!("{cycle:?}: {error}"));
                disconnect(manager, &name, &cycle).await;
            }
        }
        Cut::CancelToken(after) => {
            let mut options = options();
            let cancel = CancellationToken::new();
            options.cancel = cancel.clone();
            let cancelling = async {
                tokio::time::sleep(after).await;
                cancel.cancel();
            };
            let (connected, ()) = tokio::join!(manager.connect(&name, server, options), cancelling);
            match connected {
                Ok(_) => disconnect(manager, &name, &cycle).await,
                Err(ConnectError::Cancelled) => {
                    assert!(!manager.contains(&name), "{cycle:?}: the name stayed taken");
                }
                Err(error) => panic!("{cycle:?}: {error}"),
            }
        }
        Cut::Disconnect => {
            manager
                .connect(&name, server, options())
                .await
                .unwrap_or_else(|error| panic!("{cycle:?}: {error}"));
            disconnect(manager, &name, &cycle).await;
        }
        Cut::CallThenDisconnect(deadline) => {
            let connection = manager
                .connect(&name, server, options())
                .await
                .unwrap_or_else(|error| panic!("{cycle:?}: {error}"));
            let called = connection
                .call_tool("echo", message("stress"), &CallOptions::timeout(deadline))
                .await;
            match called {
                Ok(result) => assert_eq!(result.is_error, Some(false), "{cycle:?}"),
                Err(CallError::NotSent { .. } | CallError::OutcomeUnknown { .. }) => {}
                Err(error) => panic!("{cycle:?}: {error}"),
            }
            drop(connection);
            disconnect(manager, &name, &cycle).await;
        }
        Cut::DropThenDisconnect => {
            let connection = manager
                .connect(&name, server, options())
                .await
                .unwrap_or_else(|error| panic!("{cycle:?}: {error}"));
            drop(connection);
            // The handle was one of two (the manager holds the other): the
            // connection lives on until the name is disconnected.
            disconnect(manager, &name, &cycle).await;
        }
        Cut::Shutdown => {
            let own = Manager::new();
            own.connect(&name, server, options())
                .await
                .unwrap_or_else(|error| panic!("{cycle:?}: {error}"));
            let done = crate::common::shutdown(&own).await;
            assert_eq!(done.len(), 1, "{cycle:?}");
            let teardown = done[0].1.as_ref().expect("torn down");
            assert_eq!(teardown.ended, Ended::Shutdown, "{cycle:?}");
            assert_eq!(own.live_tasks(), 0, "{cycle:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_stress_1000_connects_and_disconnects_with_random_cancellation_points() {
    let seed = seed();
    println!("CORRAL_STRESS_SEED={seed} (set it to replay this plan)");
    let cycles = plan(seed);
    let files = Arc::new(Files::new("stress"));
    let manager = Arc::new(Manager::new());
    let baseline = tasks();
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for worker in 0..CONCURRENCY {
        let mine: Vec<Cycle> = cycles
            .iter()
            .copied()
            .filter(|cycle| cycle.index % CONCURRENCY == worker)
            .collect();
        let (manager, files) = (manager.clone(), files.clone());
        workers.spawn(async move {
            for cycle in mine {
                run(&manager, &files, cycle).await;
            }
        });
    }
    while let Some(joined) = workers.join_next().await {
        if let Err(error) = joined {
            std::panic::resume_unwind(error.into_panic());
        }
    }
    let cycled = started.elapsed();
    let settled = corral_tests::wait_until_async(SETTLE, || tasks() == baseline).await;
    println!(
        "{CYCLES} cycles, {CONCURRENCY} at a time, in {cycled:?}; then waited {:?} for the tasks",
        started.elapsed() - cycled
    );
    let spawned = files.spawned();
    let _guard = corral_tests::Guard::of(spawned.iter().copied());
    assert!(
        settled,
        "{} tasks alive {SETTLE:?} after the last cycle, baseline {baseline} (seed {seed})",
        tasks()
    );
    assert_gone_now(&spawned);
    assert!(manager.connected().is_empty(), "{:?}", manager.connected());
    assert!(
        spawned.len() <= CYCLES,
        "{} servers for {CYCLES} cycles",
        spawned.len()
    );
    println!("{} servers started, every one gone", spawned.len());
}
