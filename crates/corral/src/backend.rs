//! The names of the containment backends and of the choice between them:
//! shared words that errors, outcomes and the ledger speak, below the
//! backends themselves (`contain/`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// A containment backend.
///
/// ```
/// use corral::{Backend, BackendChoice};
/// assert_eq!(Backend::ALL.map(Backend::name), ["cgroup", "subreaper", "group"]);
/// assert_eq!("group".parse(), Ok(BackendChoice::Only(Backend::Group)));
/// assert_eq!("auto".parse(), Ok(BackendChoice::Auto));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// cgroup v2 leaf per invocation.
    Cgroup,
    /// `PR_SET_CHILD_SUBREAPER` and a `/proc` walk.
    Subreaper,
    /// A process group plus connected descendants.
    Group,
}

impl Backend {
    /// Every backend, in probe order.
    pub const ALL: [Backend; 3] = [Backend::Cgroup, Backend::Subreaper, Backend::Group];

    /// The backend's name as the command line spells it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cgroup => "cgroup",
            Backend::Subreaper => "subreaper",
            Backend::Group => "group",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which backend to use ([`Command::backend`](crate::Command::backend)).
///
/// ```
/// use corral::{Backend, BackendChoice};
/// assert_eq!(BackendChoice::default(), BackendChoice::Auto);
/// let forced: BackendChoice = "cgroup".parse()?;
/// assert_eq!(forced, BackendChoice::Only(Backend::Cgroup));
/// assert!("docker".parse::<BackendChoice>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The first available in probe order (cgroup, subreaper if this process
    /// claimed it, group).
    #[default]
    Auto,
    /// Exactly this one, or an error saying why not.
    Only(Backend),
}

impl std::str::FromStr for BackendChoice {
    type Err = String;

    /// Parses `auto`, `cgroup`, `subreaper` or `group`.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        if name == "auto" {
            return Ok(BackendChoice::Auto);
        }
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == name)
            .map(BackendChoice::Only)
            .ok_or_else(|| {
                format!("unknown backend {name:?}: choose auto, cgroup, subreaper or group")
            })
    }
}
