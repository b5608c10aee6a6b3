//! Container-shaped lanes, made with util-linux `unshare` and `setpriv` and
//! with bubblewrap (`bwrap`), no container engine: the places corral meets
//! where agents run (docs/containers.md). Each [`Shape`] builds the command
//! line that runs a program inside it; [`Lane`] holds what the shape needs
//! while it runs (a scratch directory the program may write; for the
//! delegated shape and the nested bubblewrap, the cgroup it starts in) and
//! removes it on drop.
//!
//! | shape | namespaces | cgroup2 inside | as |
//! |---|---|---|---|
//! | [`Shape::Unprivileged`] | user, PID, mount, UTS, IPC, network, cgroup | mounted read-only at `/sys/fs/cgroup` (Docker's default) | root of the user namespace, the caller outside |
//! | [`Shape::Delegated`] | the same | mounted writable at `/sys/fs/cgroup`, the namespace rooted at a fresh cgroup owned by `nobody` (rootless Podman, a `Delegate=yes` unit) | root of the user namespace, `nobody` outside; needs root to make |
//! | [`Shape::Bubblewrap`] | `bwrap --unshare-all` (user, PID, mount, UTS, IPC, network, cgroup) | the host's mounts, bound read-only with `/` | the caller |
//! | [`Shape::BubblewrapNested`] | the same, started in a fresh cgroup below the caller's (as a desktop session's programs are) | the host's v2 mount bound writable, its root outside the namespace (`/..`) | root; needs root to make |
//!
//! Inside the unshare shapes the program is the PID namespace's first
//! process (PID 1); inside bubblewrap, bwrap's own init is PID 1 and the
//! program PID 2. Either way, when PID 1 exits the kernel kills whatever is
//! left in the namespace: a test counts leftovers from inside, before it
//! exits.

use std::{
    ffi::OsString,
    fs,
    os::unix::fs::chown,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// The host's cgroup v2 hierarchy on this machine (hybrid layout: v2 beside
/// the v1 controllers, see docs/limits.md); on a pure v2 host, the root.
const V2_MOUNTS: [&str; 2] = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"];

/// `nobody`: the user a delegated cgroup is handed to.
const NOBODY: u32 = 65534;

/// The namespaces of both unshare shapes; `--fork` makes the program PID 1,
/// `--mount-proc` gives it a `/proc` of its own namespace.
const UNSHARE: [&str; 11] = [
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount",
    "--mount-proc",
    "--uts",
    "--ipc",
    "--net",
    "--cgroup",
];

/// Moves itself into the cgroup named next (as root), then runs the rest.
const ENTER_CGROUP: [&str; 3] = [
    "/bin/sh",
    "-c",
    "echo $$ > \"$0/cgroup.procs\" && exec \"$@\"",
];

/// One container shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An unprivileged container: cgroup2 read-only in a private cgroup
    /// namespace (Docker's default).
    Unprivileged,
    /// A container with a delegated cgroup, writable.
    Delegated,
    /// A bubblewrap sandbox (`bwrap --unshare-all --die-with-parent`).
    Bubblewrap,
    /// A bubblewrap sandbox started in a cgroup of its own below the
    /// caller's, with the host's v2 mount bound writable: inside, that mount
    /// shows the host's hierarchy from outside the cgroup namespace.
    BubblewrapNested,
}

impl Shape {
    /// The shapes of docs/guarantees.md's columns.
    pub const ALL: [Shape; 3] = [Shape::Unprivileged, Shape::Delegated, Shape::Bubblewrap];

    /// The shape's name in `SKIPPED:` lines and in docs/guarantees.md.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Unprivileged => "unprivileged-container",
            Shape::Delegated => "delegated-container",
            Shape::Bubblewrap => "bubblewrap",
            Shape::BubblewrapNested => "bubblewrap-nested",
        }
    }

    /// The shape named `name` ([`Shape::name`]).
    pub fn named(name: &str) -> Option<Shape> {
        Shape::ALL
            .into_iter()
            .chain([Shape::BubblewrapNested])
            .find(|s| s.name() == name)
    }

    /// Makes the shape for a test (`name`: its scratch directory's name), and
    /// checks that the kernel lets this user enter it by running `true`
    /// there; `Err` says why not (a missing tool, no root for a delegated
    /// cgroup, user namespaces refused).
    pub fn lane(self, name: &str) -> Result<Lane, String> {
        let tool = match self {
            Shape::Bubblewrap | Shape::BubblewrapNested => "/usr/bin/bwrap",
            _ => "/usr/bin/unshare",
        };
        if !Path::new(tool).exists() {
            return Err(format!(
                "{tool} is not installed (Debian packages util-linux and bubblewrap; scripts/test installs them)"
            ));
        }
        let scratch = crate::scratch(&format!("shape-{name}"));
        let _ = fs::remove_dir_all(&scratch);
        fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
        let mut lane = Lane {
            shape: self,
            scratch,
            cgroup: None,
            mount: None,
        };
        match self {
            Shape::Delegated => lane.delegate(name, Some(NOBODY))?,
            Shape::BubblewrapNested => lane.delegate(name, None)?,
            _ => {}
        }
        let probe = lane
            .command("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("cannot run {tool}: {e}"))?;
        if !probe.status.success() {
            return Err(format!(
                "the kernel refused it ({}): {}",
                probe.status,
                String::from_utf8_lossy(&probe.stderr).trim()
            ));
        }
        Ok(lane)
    }
}

/// A shape made for one test: see [`Shape::lane`].
#[derive(Debug)]
pub struct Lane {
    shape: Shape,
    /// A directory the program may write (bound writable into bubblewrap,
    /// owned by `nobody` in the delegated shape); its `TMPDIR`.
    scratch: PathBuf,
    /// The cgroup the shape starts in, where it has one of its own (the
    /// delegated shape, the nested bubblewrap), removed on drop.
    cgroup: Option<PathBuf>,
    /// The host's v2 mount, where the lane made a cgroup in it.
    mount: Option<PathBuf>,
}

impl Lane {
    /// The shape.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// The scratch directory (the program's `TMPDIR`).
    pub fn scratch(&self) -> &Path {
        &self.scratch
    }

    /// The delegated cgroup on the host, where there is one.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// The cgroups below the delegated cgroup (leaves a run left behind).
    pub fn leftover_cgroups(&self) -> Vec<PathBuf> {
        let Some(cgroup) = &self.cgroup else {
            return Vec::new();
        };
        fs::read_dir(cgroup)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.path())
            .collect()
    }

    /// Creates the lane's cgroup below this process's own (its name has
    /// `name` and this process's pid) and, with an `owner`, hands it to them
    /// as systemd does for `Delegate=yes`: the directory, `cgroup.procs`,
    /// `cgroup.subtree_control` and `cgroup.threads` (and the scratch
    /// directory).
    fn delegate(&mut self, name: &str, owner: Option<u32>) -> Result<(), String> {
        if !crate::is_root() {
            return Err("creating and delegating a cgroup needs root".to_owned());
        }
        let mount = V2_MOUNTS
            .iter()
            .map(Path::new)
            .find(|m| m.join("cgroup.procs").exists())
            .ok_or("no cgroup v2 hierarchy at /sys/fs/cgroup/unified or /sys/fs/cgroup")?;
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| e.to_string())?;
        let own = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .ok_or("no cgroup v2 line in /proc/self/cgroup")?;
        let cgroup = mount
            .join(own.trim_start_matches('/'))
            .join(format!("corral-shape-{}-{name}", std::process::id()));
        fs::create_dir(&cgroup).map_err(|e| format!("{}: {e}", cgroup.display()))?;
        self.cgroup = Some(cgroup.clone());
        self.mount = Some(mount.to_owned());
        let Some(owner) = owner else {
            return Ok(());
        };
        for file in [
            "",
            "cgroup.procs",
            "cgroup.subtree_control",
            "cgroup.threads",
        ] {
            let path = cgroup.join(file);
            chown(&path, Some(owner), Some(owner))
                .map_err(|e| format!("chown {}: {e}", path.display()))?;
        }
        chown(&self.scratch, Some(owner), Some(owner))
            .map_err(|e| format!("chown {}: {e}", self.scratch.display()))
    }

    /// The command line that runs `program` inside the shape: append its
    /// arguments. The environment passes through, with `TMPDIR` set to the
    /// scratch directory.
    pub fn command(&self, program: impl Into<OsString>) -> Command {
        let argv = self.argv(program.into());
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]).env("TMPDIR", &self.scratch);
        command
    }

    /// [`Lane::command`]'s argument vector, also for docs/containers.md.
    pub fn argv(&self, program: OsString) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        let mut push = |items: &[&str]| argv.extend(items.iter().map(OsString::from));
        // Mounts cgroup2 over /sys/fs/cgroup inside the mount namespace (the
        // host's mounts stay listed below it), then runs the program as PID 1.
        let mount_then_exec = |mode: &str| {
            format!("mount -t cgroup2 -o {mode} cgroup2 /sys/fs/cgroup && exec \"$@\"")
        };
        match self.shape {
            Shape::Unprivileged => {
                push(&["/usr/bin/unshare"]);
                push(&UNSHARE);
                push(&["--", "/bin/sh", "-c", &mount_then_exec("ro"), "sh"]);
            }
            Shape::Delegated => {
                let cgroup = self
                    .cgroup
                    .as_ref()
                    .expect("a delegated lane has its cgroup");
                // Into the delegated cgroup (as root), then nobody, then the
                // namespaces: the cgroup namespace is rooted where it began.
                push(&ENTER_CGROUP);
                argv.push(cgroup.clone().into());
                let mut push = |items: &[&str]| argv.extend(items.iter().map(OsString::from));
                let ids = format!("{NOBODY}");
                push(&["/usr/bin/setpriv", "--reuid", &ids, "--regid", &ids]);
                push(&["--clear-groups", "/usr/bin/unshare"]);
                push(&UNSHARE);
                push(&["--", "/bin/sh", "-c", &mount_then_exec("rw"), "sh"]);
            }
            Shape::Bubblewrap | Shape::BubblewrapNested => {
                let mut binds = vec![self.scratch.clone()];
                if let (Some(cgroup), Some(mount)) = (&self.cgroup, &self.mount) {
                    // Into the fresh cgroup first: the cgroup namespace is
                    // rooted there, below the root of the mount bound in.
                    push(&ENTER_CGROUP);
                    argv.push(cgroup.clone().into());
                    binds.push(mount.clone());
                }
                let mut push = |items: &[&str]| argv.extend(items.iter().map(OsString::from));
                push(&["/usr/bin/bwrap", "--unshare-all", "--die-with-parent"]);
                push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
                for bind in binds {
                    argv.extend([OsString::from("--bind"), bind.clone().into(), bind.into()]);
                }
                argv.push("--".into());
            }
        }
        argv.push(program);
        argv
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.scratch);
        if let Some(cgroup) = &self.cgroup {
            // What ran in the lane may still be exiting (bubblewrap's init
            // and its children, under load): the cgroup is removed once it
            // is empty, and what is still in it after 5 s (only this test's
            // own processes can be) is killed first. An `rmdir` at once
            // left the cgroup behind, empty moments later (docs/flakes.md
            // (35)).
            if !wait_unpopulated(cgroup, std::time::Duration::from_secs(5)) {
                let _ = fs::write(cgroup.join("cgroup.kill"), "1");
                wait_unpopulated(cgroup, std::time::Duration::from_secs(5));
            }
            for leaf in self.leftover_cgroups() {
                let _ = fs::remove_dir(leaf);
            }
            let _ = fs::remove_dir(cgroup);
        }
    }
}

/// Whether `cgroup` (and everything below it) holds no process, waited for
/// up to `limit`.
fn wait_unpopulated(cgroup: &Path, limit: std::time::Duration) -> bool {
    let until = std::time::Instant::now() + limit;
    loop {
        let events = fs::read_to_string(cgroup.join("cgroup.events")).unwrap_or_default();
        if events.is_empty() || events.lines().any(|l| l.trim() == "populated 0") {
            return true;
        }
        if std::time::Instant::now() >= until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
