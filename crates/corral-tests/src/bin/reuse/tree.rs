//! The tree every scenario supervises, and the check of the bystander.

use std::{path::Path, time::Duration};

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
