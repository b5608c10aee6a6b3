//! The cgroup v2 mount, read from `/proc/self/mountinfo` (once), and where a
//! process is in it (`/proc/PID/cgroup`).

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};
/// A cgroup v2 mount as `/proc/self/mountinfo` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct V2Mount {
    /// Where it is mounted.
    pub(crate) point: PathBuf,
    /// The cgroup shown at the mount point, as this process's cgroup
    /// namespace names it (`/..` for one outside the namespace).
    pub(crate) root: PathBuf,
    /// The super options (the comma-separated list after the source).
    options: String,
}

/// The cgroup v2 mount this process sees, in `/proc/self/mountinfo` text:
/// the first one that no later mount hides (one on its mount point or above
/// it). A container that mounts cgroup2 over `/sys/fs/cgroup` still lists
/// the mounts it inherited below it (a user namespace cannot unmount them),
/// whose mount points now lead into the new mount.
pub(crate) fn visible_v2_mount(mountinfo: &str) -> Option<V2Mount> {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER"
    let mounts: Vec<(PathBuf, Option<V2Mount>)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut left = left.split_whitespace().skip(3);
            let (root, point) = (unescape(left.next()?), unescape(left.next()?));
            let mut right = right.split_whitespace();
            let v2 = (right.next()? == "cgroup2").then(|| V2Mount {
                point: point.clone(),
                root,
                options: right.nth(1).unwrap_or_default().to_owned(),
            });
            Some((point, v2))
        })
        .collect();
    mounts.iter().enumerate().find_map(|(i, (point, v2))| {
        let hidden = mounts[i + 1..]
            .iter()
            .any(|(later, _)| point.starts_with(later));
        v2.clone().filter(|_| !hidden)
    })
}

/// Finds the cgroup v2 mount point in `/proc/self/mountinfo` text (see
/// [`visible_v2_mount`]).
pub(crate) fn find_v2_mount(mountinfo: &str) -> Option<PathBuf> {
    visible_v2_mount(mountinfo).map(|mount| mount.point)
}

/// Whether the cgroup v2 mount that [`find_v2_mount`] picks has the
/// `nsdelegate` super option: then a cgroup namespace's root is a
/// delegation boundary, and the kernel refuses to move a process in the
/// namespace to a cgroup outside it.
pub(crate) fn has_nsdelegate(mountinfo: &str) -> bool {
    visible_v2_mount(mountinfo)
        .is_some_and(|mount| mount.options.split(',').any(|o| o == "nsdelegate"))
}

/// The directory of the cgroup `own` (as `/proc/self/cgroup` names it) in
/// `mount`, or why the mount does not show it: mounted outside this
/// process's cgroup namespace (its root reads `/..`), or a part of the
/// hierarchy bound elsewhere that does not hold it.
pub(crate) fn own_path(mount: &V2Mount, own: &str) -> Result<PathBuf, String> {
    let relative = Path::new(own).strip_prefix(&mount.root).map_err(|_| {
        format!(
            "the cgroup v2 mount at {} shows the cgroup {}, which does not hold this \
             process's cgroup {own} (a mount made outside this cgroup namespace): mount \
             cgroup2 inside the namespace (mount -t cgroup2 none {})",
            mount.point.display(),
            mount.root.display(),
            mount.point.display()
        )
    })?;
    Ok(mount.point.join(relative))
}

/// Whether this machine's cgroup v2 mount has `nsdelegate` (read once).
pub(crate) fn delegates_namespaces() -> bool {
    static NSDELEGATE: OnceLock<bool> = OnceLock::new();
    *NSDELEGATE
        .get_or_init(|| crate::fault::active("nsdelegate") || mountinfo().is_ok_and(has_nsdelegate))
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let value = bytes[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            out.push(value as u8);
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
}

/// Finds this process's cgroup v2 path (the `0::` line) in `/proc/self/cgroup`.
pub(crate) fn own_cgroup(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .filter(|path| path.starts_with('/'))
}

/// Where the cgroup v2 hierarchy is mounted (read once).
pub(crate) fn mount() -> Option<&'static Path> {
    static MOUNT: OnceLock<Option<PathBuf>> = OnceLock::new();
    MOUNT
        .get_or_init(|| find_v2_mount(mountinfo().ok()?))
        .as_deref()
}

/// `/proc/self/mountinfo`, read once: the mount, the leaves' parent and
/// `nsdelegate` all come from it (each was already read once per process).
pub(crate) fn mountinfo() -> Result<&'static str, String> {
    static TEXT: OnceLock<Result<String, String>> = OnceLock::new();
    TEXT.get_or_init(|| {
        crate::identity::read_small_text("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))
    })
    .as_deref()
    .map_err(Clone::clone)
}

/// The leaf's path as `/proc/PID/cgroup` shows it (the mount's root, then
/// the path below the mount point).
fn own_relative(path: &Path) -> Option<String> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    let root = ROOT.get_or_init(|| Some(visible_v2_mount(mountinfo().ok()?)?.root));
    let relative = path.strip_prefix(mount()?).ok()?;
    Some(root.as_deref()?.join(relative).display().to_string())
}

/// Whether the process `pid` is in the cgroup `leaf` or below it (read after
/// its pidfd was opened, so a recycled pid is caught).
pub(super) fn holds(leaf: &Path, pid: i32) -> bool {
    let Some(relative) = own_relative(leaf) else {
        return false;
    };
    crate::identity::read_small_text(&format!("/proc/{pid}/cgroup"))
        .ok()
        .and_then(|text| {
            own_cgroup(&text).map(|p| p == relative || p.starts_with(&format!("{relative}/")))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_the_v2_mount_on_hybrid_hosts() {
        assert_eq!(
            find_v2_mount(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn finds_unified_mount_with_optional_fields_and_escapes() {
        let text =
            "29 23 0:26 / /sys/fs/my\\040cg rw shared:4 master:1 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(find_v2_mount(text), Some(PathBuf::from("/sys/fs/my cg")));
    }

    /// mountinfo in a container made with `unshare` that mounted cgroup2
    /// read-only over the hybrid host's `/sys/fs/cgroup` (the shape of
    /// `corral-cli`'s `containers` tests).
    const OVERMOUNTED: &str = "\
47 46 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
57 47 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
65 47 0:38 / /sys/fs/cgroup ro,relatime - cgroup2 none rw,nsdelegate
70 22 0:5 / /dev/null rw - devtmpfs udev rw
";

    #[test]
    fn the_cgroup2_mount_over_an_inherited_one_is_the_one_used() {
        assert_eq!(
            find_v2_mount(OVERMOUNTED),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert!(has_nsdelegate(OVERMOUNTED));
        // Hidden by a later mount above it, not only on it.
        let tmpfs_over = format!("{HYBRID}50 31 0:40 / /sys/fs rw - tmpfs tmpfs rw\n");
        assert_eq!(find_v2_mount(&tmpfs_over), None);
        // Of two visible ones, the first (the system's, not one mounted
        // later elsewhere).
        let second = format!("{HYBRID}51 22 0:38 / /mnt/cg rw - cgroup2 cgroup2 rw\n");
        assert_eq!(
            find_v2_mount(&second),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            find_v2_mount(HYBRID),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
    }

    #[test]
    fn the_own_cgroup_is_found_below_the_mounts_root_or_refused() {
        let mount = |root: &str| V2Mount {
            point: PathBuf::from("/sys/fs/cgroup"),
            root: PathBuf::from(root),
            options: String::new(),
        };
        assert_eq!(
            own_path(&mount("/"), "/a/b"),
            Ok(PathBuf::from("/sys/fs/cgroup/a/b"))
        );
        // A part of the hierarchy bound at the mount point.
        assert_eq!(
            own_path(&mount("/a"), "/a/b"),
            Ok(PathBuf::from("/sys/fs/cgroup/b"))
        );
        // Mounted outside this process's cgroup namespace (bubblewrap binds
        // the host's mount into one): the mount point is not its cgroup.
        let refused = own_path(&mount("/.."), "/").expect_err("refused");
        assert!(refused.contains("mount -t cgroup2"), "{refused}");
        assert!(own_path(&mount("/a"), "/ab").is_err());
    }

    #[test]
    fn unescape_decodes_only_a_backslash_and_three_octal_digits() {
        for (field, path) in [
            ("/a\\134b\\011c", "/a\\b\tc"),
            ("/a\\0400", "/a 0"),
            ("\\040a", " a"),
            ("/a040b", "/a040b"),
            ("/a\\04", "/a\\04"),
            ("/a\\", "/a\\"),
            ("/a\\089", "/a\\089"),
            ("\\x040", "\\x040"),
        ] {
            assert_eq!(unescape(field), PathBuf::from(path), "{field:?}");
        }
    }

    #[test]
    fn nsdelegate_is_read_from_the_v2_mounts_super_options() {
        assert!(!has_nsdelegate(HYBRID));
        let delegated = "29 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n";
        assert!(has_nsdelegate(delegated));
        // A mount option (left of " - ") is not a super option.
        assert!(!has_nsdelegate(
            "29 23 0:26 / /sys/fs/cgroup rw,nsdelegate - cgroup2 cgroup2 rw\n"
        ));
        // Only the cgroup2 mount counts, and only a whole option.
        assert!(!has_nsdelegate(
            "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,nsdelegate\n"
        ));
        assert!(!has_nsdelegate(
            "41 31 0:38 / /u rw - cgroup2 cgroup2 rw,nsdelegatex\n"
        ));
        assert!(!has_nsdelegate("41 31 0:38 / /u rw - cgroup2\n"));
        assert!(!has_nsdelegate("garbage\n"));
    }

    #[test]
    fn no_v2_mount_is_none() {
        assert_eq!(
            find_v2_mount("32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"),
            None
        );
        assert_eq!(find_v2_mount("garbage\n\n - \n"), None);
    }

    #[test]
    fn own_cgroup_reads_the_unified_line() {
        assert_eq!(
            own_cgroup("4:memory:/x\n0::/user.slice/a.scope\n"),
            Some("/user.slice/a.scope")
        );
        assert_eq!(own_cgroup("0::/\n"), Some("/"));
        assert_eq!(own_cgroup("1:cpu:/\n"), None);
        assert_eq!(own_cgroup("0::relative\n"), None);
    }
}
