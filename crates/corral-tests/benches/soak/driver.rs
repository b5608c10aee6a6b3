//! The soak's driver: draws invocations, keeps 32 running, takes stock at
//! quiet points, and checks everything at the end.

use std::{
    io::{IsTerminal, Write},
    path::PathBuf,
    time::Duration,
};

use corral::{Backend, Finished, Outcome};
use tokio::{task::JoinSet, time::Instant};

use crate::{
    DRAIN, HANG, Options,
    census::{self, Origin, Origins},
    invoke::{Done, End, Setup, invoke},
    is_subreaper,
    plan::{FINAL, Plan, Rng},
    tally::{Sample, Tally},
};

/// How long a quiet point waits for the supervisor tasks to end.
const SETTLE: Duration = Duration::from_secs(10);

pub struct Soak {
    options: Options,
    fixture: PathBuf,
    /// This run's id, in every tree's environment (`census::MARKER`).
    run: String,
    backends: Vec<Backend>,
    cgroup_parent: Option<PathBuf>,
    ledger: PathBuf,
    rng: Rng,
    origins: Origins,
    deferred: Vec<(usize, Plan)>,
    tally: Tally,
    base_tasks: usize,
    base_fds: usize,
    early: Option<Sample>,
    started: Instant,
    progress: bool,
}

impl Soak {
    pub fn new(options: Options, ledger: PathBuf) -> Self {
        // This process does nothing but supervise: the subreaper backend is
        // fair game (it is only ever forced, and then runs alone).
        corral::settings::Settings::new().subreaper().apply();
        let caps = corral::capabilities();
        let mut backends: Vec<Backend> = caps
            .backends
            .iter()
            .filter(|s| s.available)
            .map(|s| s.backend)
            .collect();
        if let Some(only) = &options.only {
            backends.retain(|b| only.contains(b));
        }
        for status in &caps.backends {
            if !backends.contains(&status.backend) {
                println!(
                    "soak: backend {} not used: {}",
                    status.backend, status.detail
                );
            }
        }
        let seed = options.seed;
        Self {
            fixture: PathBuf::from(env!("CARGO_BIN_EXE_fixture")),
            run: format!("{}-{seed}", std::process::id()),
            backends,
            cgroup_parent: caps.cgroup_parent,
            ledger,
            rng: Rng::new(seed),
            origins: Origins::new(),
            deferred: Vec::new(),
            tally: Tally::default(),
            base_tasks: 0,
            base_fds: 0,
            early: None,
            started: Instant::now(),
            progress: std::io::stderr().is_terminal(),
            options,
        }
    }

    pub async fn run(mut self) -> bool {
        let names: Vec<&str> = self.backends.iter().map(|b| b.name()).collect();
        println!(
            "soak: {} invocations, concurrency {}, seed {}, backends {} (subreaper runs alone), watchdog {}",
            self.options.count,
            self.options.concurrency,
            self.options.seed,
            names.join(", "),
            if self.options.watchdog { "on" } else { "off" },
        );
        println!("{}", corral_tests::bench::machine_line());
        self.base_tasks = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        self.base_fds = census::open_fds();
        self.started = Instant::now();
        let mut next = 0;
        let mut running = JoinSet::new();
        let mut ticker = tokio::time::interval(Duration::from_millis(250));
        let mut quiet_at = self.next_quiet(0);
        // Past the time bound no invocation starts; 30 s later the running
        // ones are abandoned (their trees are still taken stock of).
        let deadline = self.started + self.options.max_time;
        let mut stopped = false;
        loop {
            while !stopped && running.len() < self.options.concurrency && next < quiet_at {
                let plan = Plan::draw(&mut self.rng, &self.backends);
                let call = next;
                next += 1;
                let origin = Origin {
                    backend: plan.backend,
                    mode: plan.mode,
                };
                self.origins.insert(call, origin);
                if plan.backend == Backend::Subreaper {
                    self.deferred.push((call, plan));
                } else {
                    running.spawn(invoke(call, plan, self.setup(call)));
                }
            }
            if running.is_empty() {
                self.quiet_point().await;
                if stopped || next >= self.options.count {
                    break;
                }
                quiet_at = self.next_quiet(next);
                continue;
            }
            tokio::select! {
                joined = running.join_next() => match joined {
                    Some(Ok(done)) => self.record(done),
                    Some(Err(error)) => self.tally.fail(format!("an invocation task failed: {error}")),
                    None => {}
                },
                _ = ticker.tick() => self.show_progress(running.len()),
                () = tokio::time::sleep_until(deadline), if !stopped => {
                    stopped = true;
                    self.tally.fail(format!(
                        "the time bound ({:?}) passed after {} invocations; stopping",
                        self.options.max_time, self.tally.done
                    ));
                }
                () = tokio::time::sleep_until(deadline + HANG * 3), if stopped => {
                    self.tally.fail(format!("{} invocations hung; abandoned", running.len()));
                    running.abort_all();
                    while running.join_next().await.is_some() {}
                }
            }
        }
        if self.progress {
            eprintln!();
        }
        self.finish().await
    }

    /// The invocation count at which the next quiet point comes.
    fn next_quiet(&self, done: usize) -> usize {
        let every = self.options.quiet_every();
        let mut at = (done / every + 1) * every;
        let early = self.options.early_mark();
        if done < early && early < at {
            at = early;
        }
        at.min(self.options.count)
    }

    fn show_progress(&self, running: usize) {
        if !self.progress {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\rsoak: {}/{} done, {running} running, {:.0} s, rss {} KiB, failures {}   ",
            self.tally.done,
            self.options.count,
            self.started.elapsed().as_secs_f64(),
            census::rss_kib(),
            self.tally.failures,
        );
        let _ = err.flush();
    }

    /// Books one finished invocation.
    fn record(&mut self, done: Done) {
        let plan = &done.plan;
        self.tally.done += 1;
        *self
            .tally
            .by_backend
            .entry(plan.backend.name())
            .or_default() += 1;
        *self.tally.by_cancel.entry(plan.cancel.name()).or_default() += 1;
        *self.tally.by_mode.entry(plan.mode.name()).or_default() += 1;
        let what = format!(
            "call {}: {} on {} ({})",
            done.call,
            plan.mode.name(),
            plan.backend,
            plan.cancel.name()
        );
        let end = match &done.end {
            End::NotSpawned => "not spawned",
            End::Dropped => "dropped",
            End::Error(message) => {
                self.tally.fail(format!("{what}: {message}"));
                "error"
            }
            End::Finished(finished) => {
                self.check(&what, plan, finished, done.elapsed);
                match finished.outcome {
                    Outcome::TimedOut => "timed out",
                    Outcome::Cancelled => "cancelled",
                    Outcome::Exited { .. } => "exited",
                    Outcome::Signaled { .. } => "signaled",
                    _ => "other",
                }
            }
        };
        *self.tally.ends.entry(end).or_default() += 1;
    }

    /// What every finished call must show.
    fn check(&mut self, what: &str, plan: &Plan, finished: &Finished, elapsed: Duration) {
        let report = &finished.report;
        if report.escalated {
            self.tally.escalated += 1;
        }
        if report.backend != plan.backend {
            self.tally
                .fail(format!("{what}: ran on {} instead", report.backend));
        }
        if !report.survivors.is_empty() {
            self.tally.survivors += report.survivors.len();
            self.tally.fail(format!(
                "{what}: survivors reported: {:?}",
                report.survivors
            ));
        }
        if report.cgroup_not_removed {
            self.tally
                .fail(format!("{what}: cgroup left: {:?}", report.cgroup));
        }
        for note in &report.notes {
            if !note.starts_with("owner-death guard off") {
                self.tally.fail(format!("{what}: note: {note}"));
            }
        }
        let budget = plan.timeout + plan.grace + FINAL + DRAIN;
        let overrun = elapsed.saturating_sub(budget);
        self.tally.overrun_max = self.tally.overrun_max.max(overrun);
        if overrun > Duration::from_secs(1) {
            self.tally.overrun_over_1s += 1;
            *self
                .tally
                .late
                .entry(format!("{} on {}", plan.mode.name(), plan.backend))
                .or_default() += 1;
        }
        if overrun > HANG {
            self.tally.fail(format!(
                "{what}: returned {overrun:?} after its bound ({budget:?})"
            ));
        }
    }

    /// No tree runs: run the deferred subreaper invocations one at a time,
    /// then take stock.
    async fn quiet_point(&mut self) {
        self.settle_tasks().await;
        self.take_stock();
        for (call, plan) in std::mem::take(&mut self.deferred) {
            let bound = plan.timeout + plan.grace + FINAL + DRAIN + HANG;
            match tokio::time::timeout(bound, invoke(call, plan, self.setup(call))).await {
                Ok(done) => self.record(done),
                Err(_) => self
                    .tally
                    .fail(format!("call {call} (subreaper) hung past {bound:?}")),
            }
            self.settle_tasks().await;
            // The library clears PR_SET_CHILD_SUBREAPER when its subreaper
            // tree closes, even though this process had set it before (see
            // docs/soak.md): set it again so orphans keep coming here.
            if !is_subreaper() {
                self.tally.subreaper_flag_cleared += 1;
                // SAFETY: prctl(PR_SET_CHILD_SUBREAPER, 1) takes no pointers.
                unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
            }
            self.take_stock();
        }
        self.origins.clear();
        let sample = self.sample();
        if self.options.samples {
            println!(
                "quiet point: {} done, rss {} KiB (anonymous {} KiB, heap in use {} KiB; {} KiB before trimming the heap), fds {}, alive tasks {}, {:.1} s",
                sample.done,
                sample.rss_kib,
                sample.anon_kib,
                sample.heap_kib,
                sample.rss_untrimmed_kib,
                sample.fds,
                sample.tasks,
                self.started.elapsed().as_secs_f64()
            );
        }
        if self.early.is_none() && sample.done >= self.options.early_mark() {
            self.early = Some(sample);
        }
    }

    /// Waits until every supervisor task (those of dropped children too) has
    /// ended.
    async fn settle_tasks(&mut self) {
        let until = Instant::now() + SETTLE;
        let handle = tokio::runtime::Handle::current();
        while handle.metrics().num_alive_tasks() > self.base_tasks {
            if Instant::now() >= until {
                self.tally.fail(format!(
                    "after {} invocations, {} tasks still alive {SETTLE:?} after the last call (baseline {})",
                    self.tally.done,
                    handle.metrics().num_alive_tasks(),
                    self.base_tasks
                ));
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Kills and counts what is left of the run, then reaps the zombies.
    fn take_stock(&mut self) {
        let left = census::leftovers(&self.run, &self.origins);
        for leftover in &left {
            if leftover.documented_hole() {
                self.tally.holes += 1;
            } else {
                self.tally.leaked += 1;
                self.tally.fail(format!(
                    "after {} invocations, still running: pid {} ({}), state {}, session {}, from call {:?} {:?}",
                    self.tally.done,
                    leftover.stat.pid,
                    leftover.command,
                    leftover.stat.state,
                    leftover.stat.sid,
                    leftover.call,
                    leftover.origin
                ));
            }
        }
        let stuck = census::kill(&left);
        if stuck > 0 {
            self.tally
                .fail(format!("{stuck} leftover processes survived SIGKILL"));
        }
        self.tally.zombies_reaped += census::reap_zombies();
    }

    fn setup(&self, call: usize) -> Setup {
        Setup {
            fixture: self.fixture.clone(),
            marker: format!("{}:{call}", self.run),
            watchdog: self.options.watchdog,
        }
    }

    fn sample(&self) -> Sample {
        let rss_untrimmed_kib = census::rss_kib();
        census::trim_heap();
        Sample {
            done: self.tally.done,
            rss_untrimmed_kib,
            rss_kib: census::rss_kib(),
            anon_kib: census::rss_anon_kib(),
            heap_kib: census::heap_in_use_kib(),
            fds: census::open_fds(),
            tasks: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
        }
    }

    /// The final checks and the report. True if nothing leaked.
    async fn finish(mut self) -> bool {
        let elapsed = self.started.elapsed();
        let end = self.sample();
        // Stop the watchdog: its socket and pidfd are the only descriptors
        // the library keeps between calls.
        corral::watchdog::shutdown();
        let base_fds = self.base_fds;
        let fds_back = census::settle(Duration::from_secs(2), || census::open_fds() <= base_fds);
        let fds = census::open_fds();
        self.take_stock();
        let leaves = census::cgroup_leaves(self.cgroup_parent.as_deref());
        let records = census::ledger_records(&self.ledger);
        self.tally.print_summary(elapsed);
        let t = &self.tally;
        let mut failed: Vec<String> = Vec::new();
        let mut line = |ok: bool, text: String| {
            println!("{} {text}", if ok { "ok  " } else { "FAIL" });
            if !ok {
                failed.push(text);
            }
        };
        line(
            t.leaked == 0,
            format!("live processes from the run: {}", t.leaked),
        );
        line(
            t.survivors == 0,
            format!("survivors reported by corral: {}", t.survivors),
        );
        line(
            end.tasks == self.base_tasks,
            format!(
                "tokio alive tasks: baseline {}, end {}",
                self.base_tasks, end.tasks
            ),
        );
        line(
            fds_back,
            format!(
                "open descriptors: baseline {base_fds}, end {} with the watchdog, {fds} after it stopped",
                end.fds
            ),
        );
        line(
            leaves.is_empty(),
            format!(
                "cgroup leaves corral-{}-* left: {}",
                std::process::id(),
                leaves.len()
            ),
        );
        line(records == 0, format!("ledger records left: {records}"));
        match self.early {
            Some(early) => {
                let growth = end.rss_kib as f64 / early.rss_kib.max(1) as f64 - 1.0;
                line(
                    growth <= self.options.rss_bound(),
                    format!(
                        "RSS at {}: {} KiB, at {}: {} KiB ({:+.1} %, bound {:.0} %; \
                         before trimming the heap: {} and {} KiB)",
                        early.done,
                        early.rss_kib,
                        end.done,
                        end.rss_kib,
                        growth * 100.0,
                        self.options.rss_bound() * 100.0,
                        early.rss_untrimmed_kib,
                        end.rss_untrimmed_kib,
                    ),
                );
            }
            None => line(false, "no early RSS sample".to_owned()),
        }
        let t = &self.tally;
        line(t.failures == 0, format!("failures: {}", t.failures));
        for message in &t.shown {
            println!("  {message}");
        }
        if t.failures > t.shown.len() {
            println!("  ... and {} more", t.failures - t.shown.len());
        }
        if failed.is_empty() {
            println!("soak: PASS");
            true
        } else {
            println!("soak: FAIL");
            false
        }
    }
}
