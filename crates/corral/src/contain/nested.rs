//! Supervisors nested in a tree: another corral among the members (a
//! `timeout 60 make test` in an agent's shell command, a `corral run` inside
//! a `corral mcp serve` run) supervises a tree of its own, with its own
//! policy.
//!
//! A signal step other than `SIGKILL` goes to such a supervisor and not to
//! the members below it, so the inner one applies its policy to its tree (as
//! GNU `timeout` nested in `timeout` does: in `timeout -s ALRM 30 timeout -s
//! INT 25 CMD`, the outer one's `SIGALRM` makes the inner one send `SIGINT`
//! to `CMD`). The outer grace and `SIGKILL` still reach every member, so the
//! outer bound holds whatever the inner supervisor does.
//!
//! A nested supervisor is recognised by its executable: a member whose
//! `/proc/PID/exe` is the same file (device and inode) as the watchdog
//! executable, the `corral` binary for the `corral` command (a library host
//! that hooks the watchdog into its own program makes that program the one
//! recognised: a worker it starts from it inside a tree is taken for a
//! supervisor). Nothing the tree writes (an environment variable, a file, a
//! process name) is trusted. A tree that runs the `corral` binary itself to look like a
//! supervisor only moves its own members from this step's signal to the
//! final `SIGKILL`: what a member ignoring the signal gets anyway. A member
//! below a supervisor is one whose parent is, or is below, a supervisor that
//! is itself a member (by parent links, read during the step); an orphan of
//! the inner tree re-parented out of it is not linked, and gets the signal
//! directly, as before.

use std::{collections::HashMap, os::unix::fs::MetadataExt, path::Path, sync::Mutex};

use crate::identity;

/// How many parent links a climb follows at most (a chain of processes that
/// long is a fork bomb's, not a supervisor's).
const MAX_DEPTH: usize = 4096;

/// The (device, inode) of the executable recognised as corral: the watchdog
/// executable, told by the supervisor at each spawn ([`recognise`]).
static CORRAL: Mutex<Option<(u64, u64)>> = Mutex::new(None);

/// Recognises `executable` (the watchdog executable, if there is one) as
/// corral from now on.
pub(crate) fn recognise(executable: Option<&Path>) {
    let file = executable
        .and_then(|path| std::fs::metadata(path).ok())
        .map(|meta| (meta.dev(), meta.ino()));
    *CORRAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = file;
}

/// One signal step's view of the nested supervisors: what it learns of each
/// pid is kept for the step only.
#[derive(Debug)]
pub(crate) struct Nested {
    /// The (device, inode) pairs of the executables that are corral.
    corral: Vec<(u64, u64)>,
    /// This process: never a nested supervisor of its own tree.
    own: i32,
    /// Whether each pid looked at is a nested supervisor.
    supervisor: HashMap<i32, bool>,
    /// Whether each pid looked at is below one.
    below: HashMap<i32, bool>,
    /// How many members were left to a nested supervisor in this step.
    pub(crate) delegated: usize,
}

impl Nested {
    /// The view for one signal step.
    pub(crate) fn new() -> Self {
        let corral = CORRAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .copied()
            .collect();
        Self {
            corral,
            own: std::process::id().cast_signed(),
            supervisor: HashMap::new(),
            below: HashMap::new(),
            delegated: 0,
        }
    }

    /// Whether `pid` runs the corral executable.
    fn is_supervisor(&mut self, pid: i32) -> bool {
        if pid == self.own || pid <= 1 {
            return false;
        }
        let corral = &self.corral;
        *self.supervisor.entry(pid).or_insert_with(|| {
            std::fs::metadata(format!("/proc/{pid}/exe"))
                .is_ok_and(|meta| corral.contains(&(meta.dev(), meta.ino())))
        })
    }

    /// Whether the member `pid`, whose parent is `ppid`, is left to a nested
    /// supervisor: its parent is a member (`is_member`) that is a nested
    /// supervisor or is below one. Counted in [`Nested::delegated`] when so.
    pub(crate) fn leaves_to_inner(
        &mut self,
        pid: i32,
        ppid: i32,
        is_member: impl Fn(i32) -> bool,
    ) -> bool {
        let below = self.below_supervisor(pid, ppid, is_member);
        if below {
            self.delegated += 1;
        }
        below
    }

    /// [`leaves_to_inner`](Self::leaves_to_inner) without the count: climbs
    /// the parent links through members until a supervisor, a non-member or
    /// a pid already judged.
    fn below_supervisor(&mut self, pid: i32, ppid: i32, is_member: impl Fn(i32) -> bool) -> bool {
        let mut chain = vec![pid];
        let mut parent = ppid;
        let mut answer = false;
        for _ in 0..MAX_DEPTH {
            if let Some(&known) = self.below.get(&parent) {
                answer = known || self.is_supervisor(parent);
                break;
            }
            if parent == self.own || parent <= 1 || !is_member(parent) {
                break;
            }
            if self.is_supervisor(parent) {
                answer = true;
                break;
            }
            chain.push(parent);
            match identity::read_stat(parent) {
                Ok(stat) => parent = stat.ppid,
                Err(_) => break,
            }
        }
        // Everything on the chain below the answer shares it.
        for pid in chain {
            self.below.insert(pid, answer);
        }
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(supervisors: &[i32]) -> Nested {
        Nested {
            corral: Vec::new(),
            own: 1000,
            supervisor: supervisors.iter().map(|&pid| (pid, true)).collect(),
            below: HashMap::new(),
            delegated: 0,
        }
    }

    #[test]
    fn only_what_is_below_a_member_supervisor_is_left_to_it() {
        // 1000 (this process) -> 2000 (leader, a nested corral) -> 2001 -> 2002;
        // 2000's sibling 3000 is not below it.
        let mut nested = view(&[2000]);
        nested.supervisor.insert(2001, false);
        nested.supervisor.insert(3000, false);
        let member = |pid: i32| [2000, 2001, 2002, 3000].contains(&pid);
        assert!(!nested.leaves_to_inner(2000, 1000, member));
        assert!(nested.leaves_to_inner(2001, 2000, member));
        assert!(!nested.leaves_to_inner(3000, 1000, member));
        assert_eq!(nested.delegated, 1);
    }

    #[test]
    fn a_supervisor_that_is_not_a_member_is_not_trusted_with_anything() {
        // A member re-parented to a corral above this tree (a subreaper that
        // runs the corral binary) is not below a member.
        let mut nested = view(&[500]);
        assert!(!nested.leaves_to_inner(2001, 500, |pid| pid == 2001));
        assert_eq!(nested.delegated, 0);
    }
}
