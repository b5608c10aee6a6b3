//! What one soak invocation does, drawn at random: the fixture, the backend,
//! the policy and the point where it is cancelled.

use std::time::Duration;

use corral::Backend;

/// SplitMix64: small, seedable, good enough to spread draws (no dependency).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A duration in `[lo, hi]`, by milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A `fixture` mode with the arguments the soak gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    Exit,
    Sleep,
    IgnoreTerm,
    Fork,
    Setsid,
    Daemon,
    LeaveChildren,
    HoldStdout,
    SlowDie,
    Flood,
    ForkStorm,
}

impl Mode {
    pub const ALL: [Mode; 11] = [
        Mode::Exit,
        Mode::Sleep,
        Mode::IgnoreTerm,
        Mode::Fork,
        Mode::Setsid,
        Mode::Daemon,
        Mode::LeaveChildren,
        Mode::HoldStdout,
        Mode::SlowDie,
        Mode::Flood,
        Mode::ForkStorm,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Exit => "exit",
            Mode::Sleep => "sleep",
            Mode::IgnoreTerm => "ignore-term",
            Mode::Fork => "fork 3",
            Mode::Setsid => "setsid",
            Mode::Daemon => "daemon",
            Mode::LeaveChildren => "leave-children 2",
            Mode::HoldStdout => "hold-stdout",
            Mode::SlowDie => "slow-die 50",
            Mode::Flood => "flood",
            Mode::ForkStorm => "fork-storm 20",
        }
    }

    fn args(self, rng: &mut Rng) -> Vec<String> {
        let fixed = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect();
        match self {
            Mode::Exit => vec![
                "exit".to_owned(),
                rng.below(4).to_string(),
                "out".to_owned(),
                "err".to_owned(),
            ],
            Mode::Sleep => vec![
                "sleep".to_owned(),
                format!("{:.3}", rng.millis(10, 300).as_secs_f64()),
            ],
            Mode::IgnoreTerm => fixed(&["ignore-term"]),
            Mode::Fork => fixed(&["fork", "3"]),
            Mode::Setsid => fixed(&["setsid"]),
            Mode::Daemon => fixed(&["daemon"]),
            Mode::LeaveChildren => fixed(&["leave-children", "2"]),
            Mode::HoldStdout => fixed(&["hold-stdout"]),
            Mode::SlowDie => fixed(&["slow-die", "50"]),
            Mode::Flood => fixed(&["flood"]),
            Mode::ForkStorm => fixed(&["fork-storm", "20"]),
        }
    }

    /// Positions in the readiness line that the process-group backend may
    /// lose by design (an orphan in a session of its own: see the G1 row of
    /// docs/guarantees.md). Such an escape is counted and killed, not a leak.
    pub fn group_holes(self) -> &'static [usize] {
        match self {
            Mode::Daemon | Mode::Setsid => &[1],
            Mode::LeaveChildren => &[2],
            _ => &[],
        }
    }
}

/// Where the invocation is interrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cancel {
    /// The spawn future is dropped before it returns. `Command::spawn` does
    /// its work at its first poll, so this means dropping it unpolled:
    /// nothing may start.
    BeforeSpawn,
    /// Once the first output arrived: the token, `terminate()` or dropping
    /// the `Child` (see [`Stop`]).
    DuringOutput,
    /// The `wait` future (and with it the `Child`) is dropped between the
    /// time limit and the end of the grace.
    DuringGrace,
    /// The same, between the end of the grace and the end of the final bound.
    DuringFinal,
    /// Waited for to the end; the time limit ends what runs for ever.
    Never,
}

impl Cancel {
    pub const ALL: [Cancel; 5] = [
        Cancel::BeforeSpawn,
        Cancel::DuringOutput,
        Cancel::DuringGrace,
        Cancel::DuringFinal,
        Cancel::Never,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cancel::BeforeSpawn => "before-spawn",
            Cancel::DuringOutput => "during-output",
            Cancel::DuringGrace => "during-grace",
            Cancel::DuringFinal => "during-final",
            Cancel::Never => "never",
        }
    }
}

/// How a `DuringOutput` cancellation is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Token,
    Terminate,
    Drop,
}

/// The final bound of every invocation.
pub const FINAL: Duration = Duration::from_millis(200);

/// One invocation, fully drawn.
#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    pub args: Vec<String>,
    pub backend: Backend,
    pub cancel: Cancel,
    pub stop: Stop,
    pub grace: Duration,
    pub timeout: Duration,
    /// For `DuringGrace` / `DuringFinal`: how long after the time limit the
    /// `wait` future is dropped.
    pub drop_after: Duration,
}

impl Plan {
    /// Draws an invocation. `backends` are those available here; the
    /// subreaper backend, if listed, is drawn one time in twenty (it runs
    /// alone, see the soak's documentation).
    pub fn draw(rng: &mut Rng, backends: &[Backend]) -> Self {
        let mode = rng.pick(&Mode::ALL);
        let shared: Vec<Backend> = backends
            .iter()
            .copied()
            .filter(|&b| b != Backend::Subreaper)
            .collect();
        let subreaper = backends.contains(&Backend::Subreaper);
        let backend = if subreaper && (shared.is_empty() || rng.below(20) == 0) {
            Backend::Subreaper
        } else {
            rng.pick(&shared)
        };
        let cancel = rng.pick(&Cancel::ALL);
        let grace = rng.millis(50, 200);
        let drop_after = match cancel {
            Cancel::DuringGrace => rng.millis(0, grace.as_millis() as u64),
            Cancel::DuringFinal => grace + rng.millis(0, FINAL.as_millis() as u64),
            _ => Duration::ZERO,
        };
        Self {
            mode,
            args: mode.args(rng),
            backend,
            cancel,
            stop: rng.pick(&[Stop::Token, Stop::Terminate, Stop::Drop]),
            grace,
            timeout: rng.millis(50, 400),
            drop_after,
        }
    }
}
