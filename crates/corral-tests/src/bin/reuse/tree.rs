//! The tree every scenario supervises, the check of the bystander, and the
//! check that the tree's leaf went with it.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use corral_tests::proc;

use crate::{
    Res, fail,
    procs::{Ident, children, wait_until},
};

/// `sh -c` script of the tree: two fixture sleepers, reaped by `sh`'s `wait`.
pub(crate) fn tree_script(fixture: &Path) -> Res<String> {
    let path = fixture.to_str().ok_or("the fixture path is not UTF-8")?;
    if path.contains('\'') {
        return fail("the fixture path contains a quote");
    }
    Ok(format!(
        "'{path}' sleep 600 &\n'{path}' sleep 600 &\nwait\n"
    ))
}

/// The leader's members, once both sleepers run the fixture.
pub(crate) async fn members_of(leader: Ident) -> Res<(Ident, Ident)> {
    let mut found = Vec::new();
    let ready = wait_until(Duration::from_secs(10), || {
        found = children(leader.pid)
            .iter()
            .filter(|s| proc::command_line(s).ends_with(" sleep 600"))
            .map(|s| Ident {
                pid: s.pid,
                start: s.start_time,
            })
            .collect();
        found.len() == 2
    })
    .await;
    match found.as_slice() {
        [x, y] if ready => Ok((*x, *y)),
        _ => fail(format!(
            "the leader {leader} did not get its two sleepers: {found:?}"
        )),
    }
}

/// Checks the bystander; the error says what happened to it.
pub(crate) fn check_bystander(bystander: Ident, when: &str) -> Res<()> {
    if bystander.untouched() {
        Ok(())
    } else {
        fail(format!(
            "BUG: the bystander {bystander}, which took the pid of a dead process of the tree, was signalled {when}: {}",
            bystander.describe_pid()
        ))
    }
}

/// Fails if a leaf a scenario's tree ran in is still there once the scenario
/// is over: its cleanup (the cancelled call's wait, the watchdog, the sweep)
/// removes it, and a leaf left now would stay, empty, after this namespace
/// ends (docs/flakes.md (31)). The failure says the leaf's state; the leaf is
/// then removed once it is empty, so the failure leaks nothing.
pub(crate) async fn check_leaves_gone(leaves: &[PathBuf]) -> Res<()> {
    let mut left = Vec::new();
    for leaf in leaves.iter().filter(|leaf| leaf.exists()) {
        let read = |file: &str| {
            std::fs::read_to_string(leaf.join(file))
                .unwrap_or_else(|e| format!("({e})"))
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        left.push(format!(
            "{}: events [{}], procs [{}]",
            leaf.display(),
            read("cgroup.events"),
            read("cgroup.procs")
        ));
        wait_until(Duration::from_secs(5), || std::fs::remove_dir(leaf).is_ok()).await;
    }
    if left.is_empty() {
        Ok(())
    } else {
        fail(format!("the tree's leaf was left: {}", left.join("; ")))
    }
}
