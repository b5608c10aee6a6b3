//! The test harness shared by corral's integration tests (this crate's
//! `tests/`, `corral-cli`'s and `corral-mcp`'s), its benchmarks and its
//! fixture programs.
//!
//! Processes are always named by *identity* ([`Proc`]: pid plus start time
//! from `/proc/PID/stat`), never by pid alone, so that a recycled pid is
//! never mistaken for a process a test started. Signals are only ever sent
//! through a pidfd after re-checking that identity ([`Proc::signal`],
//! [`kill_leftovers`], [`Guard`]); tests never signal anything by name.
//!
//! | module | what |
//! |---|---|
//! | [`proc`] | `Proc`; `/proc` read with corral's own `/proc/PID/stat` parser |
//! | [`sched`] | `Busy`: what the scheduler gave a process, to tell its own waits from a starved machine |
//! | [`guard`] | killing leftovers by identity: `Guard`, `Owned`, `Bystander` |
//! | [`lines`] | readiness lines (`ready <pid>...`) and line readers |
//! | [`wait`] | `wait_until(deadline, predicate)`, blocking and async; `exited_within` on a pidfd |
//! | [`paths`] | binaries under test ([`bin_path!`]), scratch files and dirs |
//! | [`skip`] | what this machine can run, and `SKIPPED:` lines |
//! | [`shapes`] | container-shaped lanes (`unshare`, bubblewrap) to run a program in |
//! | [`this_process`] | the test process itself: subreaper, zombies, fds, CPU |
//! | [`bench`](mod@bench) | the benchmarks' knobs, statistics and cgroup check |
//!
//! Zombies are not survivors: [`Proc::is_alive`] is false for them.

pub mod bench;
pub mod guard;
pub mod lines;
pub mod paths;
pub mod proc;
pub mod sched;
pub mod shapes;
pub mod skip;
pub mod this_process;
pub mod wait;

pub use guard::{Bystander, Guard, Owned, kill_leftovers, kill_within};
pub use lines::{
    Lines, READY_TIMEOUT, parse_ready, read_ready, read_ready_blocking, try_parse_ready,
};
pub use paths::{Scratch, scratch};
pub use proc::{Proc, Stat, stat};
pub use skip::{cgroup_parent, containing_backend, is_root, skipped};
pub use wait::{exited_within, wait_until, wait_until_async};
