//! `--user USER[:GROUP]`: names and numbers resolved through `/etc/passwd`
//! and `/etc/group` (local files only; a user known only to NSS, LDAP say,
//! is given by number).

use anyhow::{Context, bail};

/// Who the command runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
}

/// Resolves `USER[:GROUP]` against this machine's files, and refuses it
/// unless corral runs as root (or it names corral's own ids).
///
/// # Errors
/// An unknown user or group, a bad form, or no root.
pub fn resolve(spec: &str) -> anyhow::Result<Ids> {
    let read = |path: &str| {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {path} for --user"))
    };
    let ids = resolve_in(spec, &read("/etc/passwd")?, &read("/etc/group")?)
        .map_err(anyhow::Error::msg)?;
    let status = read("/proc/self/status")?;
    let (euid, egid) = (effective(&status, "Uid:"), effective(&status, "Gid:"));
    if euid != Some(0) && (euid != Some(ids.uid) || egid != Some(ids.gid)) {
        bail!(
            "--user {spec} needs root: corral runs as uid {}; run corral as root \
             (e.g. sudo corral run --user {spec} -- ...), or drop --user",
            euid.map_or_else(|| "?".to_owned(), |u| u.to_string())
        );
    }
    Ok(ids)
}

/// The effective id (the second number) of a `Uid:` or `Gid:` line of
/// `/proc/self/status`.
fn effective(status: &str, key: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// [`resolve`] against the given file contents. A user given without a group
/// takes its primary group from `passwd`.
fn resolve_in(spec: &str, passwd: &str, group: &str) -> Result<Ids, String> {
    let (user, group_name) = match spec.split_once(':') {
        Some((user, group)) => (user, Some(group)),
        None => (spec, None),
    };
    if user.is_empty() || group_name == Some("") {
        return Err(format!(
            "--user {spec:?}: give USER or USER:GROUP, names or numbers, e.g. --user \
             corral-run or --user 999:999"
        ));
    }
    // name:x:uid:gid:...
    let users = passwd.lines().filter_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let uid = fields.nth(1)?.parse::<u32>().ok()?;
        let gid = fields.next()?.parse::<u32>().ok()?;
        Some((name, uid, gid))
    });
    let entry = match user.parse::<u32>() {
        Ok(uid) => users
            .into_iter()
            .find(|&(_, u, _)| u == uid)
            .map_or((uid, None), |(_, u, g)| (u, Some(g))),
        Err(_) => {
            let (_, uid, gid) = users
                .into_iter()
                .find(|&(name, _, _)| name == user)
                .ok_or_else(|| {
                    format!(
                        "unknown user {user:?} (not in /etc/passwd): give an existing user \
                         name or a numeric uid with its group, e.g. --user 999:999"
                    )
                })?;
            (uid, Some(gid))
        }
    };
    let (uid, primary) = entry;
    let gid = match group_name {
        Some(name) => match name.parse::<u32>() {
            Ok(gid) => gid,
            // name:x:gid:members
            Err(_) => group
                .lines()
                .find_map(|line| {
                    let mut fields = line.split(':');
                    (fields.next()? == name).then(|| fields.nth(1)?.parse::<u32>().ok())?
                })
                .ok_or_else(|| {
                    format!(
                        "unknown group {name:?} (not in /etc/group): give an existing group \
                         name or a numeric gid, e.g. --user {user}:65534"
                    )
                })?,
        },
        None => primary.ok_or_else(|| {
            format!(
                "uid {uid} has no entry in /etc/passwd, so its group is unknown: give one, \
                 e.g. --user {uid}:{uid}"
            )
        })?,
    };
    Ok(Ids { uid, gid })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          broken line\n\
                          nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                          ci:x:1001:1002::/home/ci:/bin/sh\n";
    const GROUP: &str = "root:x:0:\nnogroup:x:65534:\nci:x:1002:\nstaff:x:50:ci\n";

    fn ids(uid: u32, gid: u32) -> Result<Ids, String> {
        Ok(Ids { uid, gid })
    }

    #[test]
    fn names_and_numbers_resolve() {
        assert_eq!(resolve_in("nobody", PASSWD, GROUP), ids(65534, 65534));
        assert_eq!(resolve_in("ci", PASSWD, GROUP), ids(1001, 1002));
        assert_eq!(resolve_in("1001", PASSWD, GROUP), ids(1001, 1002));
        assert_eq!(resolve_in("ci:staff", PASSWD, GROUP), ids(1001, 50));
        assert_eq!(resolve_in("ci:7", PASSWD, GROUP), ids(1001, 7));
        assert_eq!(resolve_in("4242:4243", PASSWD, GROUP), ids(4242, 4243));
        assert_eq!(resolve_in("0", PASSWD, GROUP), ids(0, 0));
    }

    #[test]
    fn unknown_names_and_bad_forms_say_what_to_give() {
        for (spec, needle) in [
            ("nosuch", "unknown user \"nosuch\""),
            ("ci:nosuch", "unknown group \"nosuch\""),
            ("4242", "uid 4242 has no entry in /etc/passwd"),
            ("", "give USER or USER:GROUP"),
            (":ci", "give USER or USER:GROUP"),
            ("ci:", "give USER or USER:GROUP"),
            // Not a field-wise match of another column.
            ("x", "unknown user"),
            ("/root", "unknown user"),
        ] {
            let error = resolve_in(spec, PASSWD, GROUP).expect_err(spec);
            assert!(error.contains(needle), "{spec:?}: {error}");
        }
    }

    #[test]
    fn reads_the_effective_id() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t5\t6\t6\t6\n";
        assert_eq!(effective(status, "Uid:"), Some(0));
        assert_eq!(effective(status, "Gid:"), Some(6));
        assert_eq!(effective("Uid:\t1\n", "Uid:"), None);
    }
}
