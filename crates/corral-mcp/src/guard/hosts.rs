//! The agent hosts and where they keep their MCP servers: one entry per
//! host, so a new host is one entry in [`HOSTS`].

use std::path::{Path, PathBuf};

/// Whose servers a file holds.
///
/// ```
/// use corral_mcp::guard::Scope;
///
/// assert_eq!(Scope::Local.name(), "local");
/// // `status` lists the user's entries first.
/// assert!(Scope::User < Scope::Local && Scope::Local < Scope::Project);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// The user's, for every project.
    User,
    /// The user's, for one project only, kept in a user file (Claude
    /// Code's `projects["DIR"]`).
    Local,
    /// A project's, kept in the project.
    Project,
}

impl Scope {
    /// `user`, `local` or `project`.
    pub fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Local => "local",
            Self::Project => "project",
        }
    }
}

/// How a file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON, or JSONC (comments and trailing commas).
    Json,
    /// TOML.
    Toml,
}

/// The directory a file's path starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Base {
    /// `$HOME`.
    Home,
    /// `$CLAUDE_CONFIG_DIR`, else `$HOME`.
    ClaudeConfig,
    /// `$XDG_CONFIG_HOME`, else `$HOME/.config`.
    Config,
    /// `$CODEX_HOME`, else `$HOME/.codex`.
    CodexHome,
    /// The project directory (`--project`, else the current one).
    Project,
}

/// One key on the way to the servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// This key.
    Name(&'static str),
    /// The project directory's absolute path.
    ProjectDir,
}

/// One file of a host.
#[derive(Debug, Clone, Copy)]
pub struct FileSpec {
    /// Whose servers.
    pub scope: Scope,
    /// Where its path starts.
    pub base: Base,
    /// Its names below the base, any of which the host reads.
    pub names: &'static [&'static str],
    /// The keys down to each object that holds servers.
    pub containers: &'static [&'static [Key]],
}

/// One host: [`HOSTS`] lists them, [`host`] finds one by its id.
///
/// ```
/// use corral_mcp::guard::{HOSTS, host};
///
/// let ids: Vec<&str> = HOSTS.iter().map(|host| host.id).collect();
/// assert!(ids.contains(&"claude-code") && ids.contains(&"codex"));
/// assert_eq!(host("codex").map(|host| host.name), Some("Codex"));
/// assert!(host("notepad").is_none());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// Its name on the command line (`--host`).
    pub id: &'static str,
    /// Its name for people.
    pub name: &'static str,
    /// The files' format.
    pub(crate) format: Format,
    /// Its files.
    pub(crate) files: &'static [FileSpec],
}

use Key::Name;

const MCP_SERVERS: &[&[Key]] = &[&[Name("mcpServers")]];

/// Every known host.
pub const HOSTS: &[Host] = &[
    Host {
        id: "claude-code",
        name: "Claude Code",
        format: Format::Json,
        files: &[
            FileSpec {
                scope: Scope::User,
                base: Base::ClaudeConfig,
                names: &[".claude.json"],
                containers: MCP_SERVERS,
            },
            FileSpec {
                scope: Scope::Local,
                base: Base::ClaudeConfig,
                names: &[".claude.json"],
                containers: &[&[Name("projects"), Key::ProjectDir, Name("mcpServers")]],
            },
            FileSpec {
                scope: Scope::Project,
                base: Base::Project,
                names: &[".mcp.json"],
                containers: MCP_SERVERS,
            },
        ],
    },
    Host {
        id: "claude-desktop",
        name: "Claude Desktop",
        format: Format::Json,
        files: &[FileSpec {
            scope: Scope::User,
            base: Base::Config,
            names: &["Claude/claude_desktop_config.json"],
            containers: MCP_SERVERS,
        }],
    },
    Host {
        id: "codex",
        name: "Codex",
        format: Format::Toml,
        files: &[
            FileSpec {
                scope: Scope::User,
                base: Base::CodexHome,
                names: &["config.toml"],
                containers: &[&[Name("mcp_servers")]],
            },
            FileSpec {
                scope: Scope::Project,
                base: Base::Project,
                names: &[".codex/config.toml"],
                containers: &[&[Name("mcp_servers")]],
            },
        ],
    },
    Host {
        id: "gemini",
        name: "Gemini CLI",
        format: Format::Json,
        files: &[
            FileSpec {
                scope: Scope::User,
                base: Base::Home,
                names: &[".gemini/settings.json"],
                containers: MCP_SERVERS,
            },
            FileSpec {
                scope: Scope::Project,
                base: Base::Project,
                names: &[".gemini/settings.json"],
                containers: MCP_SERVERS,
            },
        ],
    },
    Host {
        id: "opencode",
        name: "opencode",
        format: Format::Json,
        files: &[
            FileSpec {
                scope: Scope::User,
                base: Base::Config,
                names: &["opencode/opencode.json", "opencode/opencode.jsonc"],
                containers: OPENCODE,
            },
            FileSpec {
                scope: Scope::Project,
                base: Base::Project,
                names: &["opencode.json", "opencode.jsonc"],
                containers: OPENCODE,
            },
        ],
    },
    Host {
        id: "cursor",
        name: "Cursor",
        format: Format::Json,
        files: &[
            FileSpec {
                scope: Scope::User,
                base: Base::Home,
                names: &[".cursor/mcp.json"],
                containers: MCP_SERVERS,
            },
            FileSpec {
                scope: Scope::Project,
                base: Base::Project,
                names: &[".cursor/mcp.json"],
                containers: MCP_SERVERS,
            },
        ],
    },
    Host {
        id: "vscode",
        name: "VS Code",
        format: Format::Json,
        files: &[
            FileSpec {
                scope: Scope::User,
                base: Base::Config,
                names: &["Code/User/mcp.json"],
                containers: &[&[Name("servers")]],
            },
            FileSpec {
                scope: Scope::Project,
                base: Base::Project,
                names: &[".vscode/mcp.json"],
                containers: &[&[Name("servers")]],
            },
        ],
    },
];

/// opencode: `mcp.NAME`, and the newer `mcp.servers.NAME`.
const OPENCODE: &[&[Key]] = &[&[Name("mcp"), Name("servers")], &[Name("mcp")]];

/// The directories the files' paths start from.
///
/// ```
/// use std::path::Path;
///
/// use corral_mcp::guard::Places;
///
/// match Places::from_env(Some(Path::new("/"))) {
///     Ok(places) => {
///         assert_eq!(places.project, Path::new("/"));
///         assert!(places.home.is_absolute());
///     }
///     // Without an absolute HOME there is nothing to guard.
///     Err(message) => assert!(message.contains("HOME"), "{message}"),
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Places {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$CLAUDE_CONFIG_DIR`, else `$HOME`.
    pub claude_config: PathBuf,
    /// `$XDG_CONFIG_HOME`, else `$HOME/.config`.
    pub config: PathBuf,
    /// `$CODEX_HOME`, else `$HOME/.codex`.
    pub codex_home: PathBuf,
    /// The project directory, absolute.
    pub project: PathBuf,
}

impl Places {
    /// From the environment: `HOME` (required), `CLAUDE_CONFIG_DIR`,
    /// `XDG_CONFIG_HOME`, `CODEX_HOME`; `project` (else the current
    /// directory) made absolute.
    ///
    /// # Errors
    /// `HOME` is not set, or the project directory cannot be resolved.
    pub fn from_env(project: Option<&Path>) -> Result<Self, String> {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        let home = var("HOME").ok_or_else(|| {
            String::from("HOME is not set to an absolute path: set it to the home directory whose hosts to guard")
        })?;
        let project = match project {
            Some(dir) => dir.to_path_buf(),
            None => std::env::current_dir().map_err(|e| {
                format!("cannot read the current directory ({e}): pass --project DIR")
            })?,
        };
        let project = std::fs::canonicalize(&project).map_err(|e| {
            format!(
                "the project directory {}: {e}; pass an existing directory to --project",
                project.display()
            )
        })?;
        Ok(Self {
            claude_config: var("CLAUDE_CONFIG_DIR").unwrap_or_else(|| home.clone()),
            config: var("XDG_CONFIG_HOME").unwrap_or_else(|| home.join(".config")),
            codex_home: var("CODEX_HOME").unwrap_or_else(|| home.join(".codex")),
            project,
            home,
        })
    }

    /// Where `base` is.
    pub(crate) fn base(&self, base: Base) -> &Path {
        match base {
            Base::Home => &self.home,
            Base::ClaudeConfig => &self.claude_config,
            Base::Config => &self.config,
            Base::CodexHome => &self.codex_home,
            Base::Project => &self.project,
        }
    }

    /// `keys` with the project directory filled in.
    pub(crate) fn keys(&self, keys: &[Key]) -> Vec<String> {
        keys.iter()
            .map(|key| match key {
                Key::Name(name) => (*name).to_owned(),
                Key::ProjectDir => self.project.to_string_lossy().into_owned(),
            })
            .collect()
    }
}

/// One config file to look at: its path, its host, and what it holds.
#[derive(Debug, Clone)]
pub struct Config {
    /// The path the host reads (maybe a symbolic link).
    pub path: PathBuf,
    /// The host.
    pub host: &'static Host,
    /// Each object holding servers: its scope and keys.
    pub containers: Vec<(Scope, Vec<String>)>,
}

/// The config files of `hosts` that exist, each once (a project in the
/// home directory shares files with the user scope; the first scope
/// wins).
pub fn configs(places: &Places, hosts: &[&'static Host]) -> Vec<Config> {
    let mut found: Vec<(Option<PathBuf>, Config)> = Vec::new();
    for &host in hosts {
        for spec in host.files {
            for name in spec.names {
                let path = places.base(spec.base).join(name);
                if std::fs::symlink_metadata(&path).is_err() {
                    continue;
                }
                let real = std::fs::canonicalize(&path).ok();
                let containers: Vec<(Scope, Vec<String>)> = spec
                    .containers
                    .iter()
                    .map(|keys| (spec.scope, places.keys(keys)))
                    .collect();
                let same = |(r, c): &&mut (Option<PathBuf>, Config)| {
                    (real.is_some() && *r == real) || c.path == path
                };
                if let Some((_, config)) = found.iter_mut().find(|entry| same(entry)) {
                    for (scope, keys) in containers {
                        if !config.containers.iter().any(|(_, k)| *k == keys) {
                            config.containers.push((scope, keys));
                        }
                    }
                } else {
                    found.push((
                        real,
                        Config {
                            path,
                            host,
                            containers,
                        },
                    ));
                }
            }
        }
    }
    found.into_iter().map(|(_, config)| config).collect()
}

/// The host named `id` on the command line.
pub fn host(id: &str) -> Option<&'static Host> {
    HOSTS.iter().find(|host| host.id == id)
}
