//! `corral mcp serve`: the arguments become [`ServeOptions`] and a
//! transport; the library's [`CorralServer`] answers; a signal (or the
//! parent's death, or the stdio client leaving) ends every run's tree and
//! exits 0.

use std::{
    collections::HashMap,
    fs::File,
    io::{self, Read, Write as _},
    net::SocketAddr,
    path::{Path, PathBuf},
};

use anyhow::{Context, bail};
use corral_mcp::{
    private_file::{self, Access},
    serve::{
        CommandTools, CorralServer, Principal, Runner, ServeOptions,
        transport::{self, Client, HttpAuth},
    },
};
use tokio_util::sync::CancellationToken;

use crate::{
    cli::ServeArgs,
    kit::{
        exit::Status,
        signals::{self, Watch},
        sink::ReportArgs,
        startup,
    },
};

/// `nobody`'s uid: shared by whatever else runs as `nobody`, so no account
/// of the runs' own.
const NOBODY: u32 = 65534;

/// The longest token file read.
const MAX_TOKEN_FILE: u64 = 4096;

/// Writes one line starting `corral mcp serve: ` to standard error (the
/// lines tests and users look for: the token, the address).
macro_rules! tell {
    ($($arg:tt)*) => {{
        let _ = writeln!(io::stderr(), "corral mcp serve: {}", format_args!($($arg)*));
    }};
}

/// Where the server listens, and who may call it.
#[derive(Debug)]
enum Transport {
    Stdio,
    Http {
        address: SocketAddr,
        auth: HttpAuth,
        /// The token made here (no --token-file): printed once listening.
        generated: Option<String>,
    },
}

/// Serves until stopped. `parent` is corral's parent pid as read first
/// thing at start-up (its death counts as `SIGTERM`).
///
/// # Errors
/// A bad option, token file or address, or a transport that fails (exit
/// status 125).
pub fn serve(args: ServeArgs, parent: i32) -> anyhow::Result<Status> {
    startup::keep_inherited_descriptors()?;
    let transport = transport_of(&args)?;
    let mut options = options_of(&args);
    if let Some(path) = &args.tools {
        options.tools = CommandTools::load(path)?;
    }
    run_as(args.user.as_deref(), &mut options)?;
    check_limits(&options.tree_limits, options.backend)?;
    startup::supervisor(&ReportArgs::default(), args.verbose)?;
    // Answers of many MB come and go: each freed one goes back to the
    // kernel, so the server's peak is what it holds (docs/flakes.md (28)).
    corral::host::release_large_frees(1 << 20);
    startup::supervise(serve_until_stopped(transport, options, parent))
}

/// Who every run runs as: `--user` (root only), or the server's own user,
/// with a warning when that is root.
fn run_as(user: Option<&str>, options: &mut ServeOptions) -> anyhow::Result<()> {
    let me = rustix::process::geteuid();
    match user {
        Some(spec) if !me.is_root() => bail!(
            "--user {spec} needs root: corral mcp serve runs as uid {}, and every run already \
             runs as that user; drop --user, or start the server as root",
            me.as_raw()
        ),
        Some(spec) => {
            let ids = crate::user::resolve(spec)?;
            if ids.uid == NOBODY {
                tell!(
                    "warning: --user {spec} runs every command as nobody (uid {NOBODY}), a uid \
                     other services share: any process of theirs can read a run's environment, \
                     signal or trace it; run them as an account of their own: useradd --system \
                     --no-create-home corral-run, then --user corral-run"
                );
            }
            options.user = Some(ids.uid);
            options.group = Some(ids.gid);
        }
        None if me.is_root() => tell!(
            "warning: running as root without --user: every command runs as root and can \
             leave its tree's containment; add --user USER to run them as an account of their \
             own (useradd --system --no-create-home corral-run, then --user corral-run)"
        ),
        None => {}
    }
    Ok(())
}

/// Refuses to serve with run limits this host cannot enforce (unless best
/// effort): every run would fail otherwise.
fn check_limits(limits: &corral::Limits, backend: corral::BackendChoice) -> anyhow::Result<()> {
    if limits.wanted().is_empty() || limits.best_effort_tree {
        return Ok(());
    }
    if let corral::BackendChoice::Only(other) = backend
        && other != corral::Backend::Cgroup
    {
        anyhow::bail!(
            "limits on runs need the cgroup backend, and --backend {other} was chosen; \
             choose --backend cgroup or auto (or add --limits-best-effort)"
        );
    }
    let wanted = limits.wanted();
    for status in corral::capabilities().limits {
        if wanted.contains(&status.limit) && !status.available {
            anyhow::bail!(
                "cannot enforce the {} limit on runs: {} (or add --limits-best-effort)",
                status.limit,
                status.detail
            );
        }
    }
    Ok(())
}

fn options_of(args: &ServeArgs) -> ServeOptions {
    let mut options = ServeOptions::default();
    options.roots.clone_from(&args.roots);
    if let Some(n) = args.max_concurrent {
        options.max_concurrent = n;
    }
    options.reject_when_busy = args.reject_when_busy;
    if let Some(bytes) = args.max_output {
        options.max_output = bytes;
    }
    if let Some(d) = args.default_timeout {
        options.default_timeout = d;
    }
    if let Some(d) = args.max_timeout {
        options.max_timeout = d;
    }
    if let Some(d) = args.kill_after {
        options.kill_after = d;
    }
    if let Some(d) = args.final_bound {
        options.final_bound = d;
    }
    if args.no_tasks {
        options.task_window = None;
    } else if let Some(d) = args.task_window {
        options.task_window = Some(d);
    }
    if let Some(d) = args.task_ttl {
        options.task_ttl = d;
    }
    if let Some(n) = args.max_tasks {
        options.max_tasks = n;
    }
    options.backend = args.backend;
    options.audit.clone_from(&args.audit);
    options.tree_limits = args.limits.limits();
    options.tools_only = args.tools_only;
    options
}

/// Checks the HTTP options (before anything starts).
fn transport_of(args: &ServeArgs) -> anyhow::Result<Transport> {
    let Some(address) = args.http else {
        return Ok(Transport::Stdio);
    };
    check_address(address, args.allow_remote)?;
    let (mut auth, generated) = if args.token_files.is_empty() {
        let token = random_token()?;
        (HttpAuth::new(token.clone()), Some(token))
    } else {
        (HttpAuth::with_clients(clients(&args.token_files)?), None)
    };
    auth.allowed_origins.clone_from(&args.allowed_origins);
    auth.any_host = args.allow_remote;
    Ok(Transport::Http {
        address,
        auth,
        generated,
    })
}

/// Refuses a non-loopback address without `--allow-remote`.
fn check_address(address: SocketAddr, allow_remote: bool) -> anyhow::Result<()> {
    if address.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    bail!(
        "--http {address}: not a loopback address; whoever holds the token can run commands \
         here, over plain HTTP: listen on 127.0.0.1 (or [::1]), or pass --allow-remote \
         (and put a TLS proxy in front)"
    )
}

/// The clients of `--token-file` files: each file's token, named by the
/// file's stem. Two files naming the same client, or holding the same
/// token, are refused (a token must say who calls).
fn clients(paths: &[PathBuf]) -> anyhow::Result<Vec<Client>> {
    let mut names: HashMap<String, &Path> = HashMap::new();
    let mut tokens: HashMap<String, &Path> = HashMap::new();
    let mut clients = Vec::new();
    for path in paths {
        let shown = path.display();
        let name = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .filter(|stem| !stem.is_empty())
            .with_context(|| {
                format!(
                    "--token-file {shown}: the file's name names the client and must be UTF-8 \
                     text, e.g. alice.token"
                )
            })?
            .to_owned();
        if let Some(other) = names.insert(name.clone(), path) {
            bail!(
                "--token-file {shown} and {}: both name the client {name:?} (a client is named \
                 by its file's name without the extension); rename one",
                other.display()
            );
        }
        let token = read_token(path)?;
        if let Some(other) = tokens.insert(token.clone(), path) {
            bail!(
                "--token-file {shown} and {}: the same token; each client needs its own, \
                 e.g. openssl rand -hex 32 > FILE",
                other.display()
            );
        }
        clients.push(Client::new(Principal::new(name), token));
    }
    Ok(clients)
}

/// The token in `path`: its contents, trimmed, at most [`MAX_TOKEN_FILE`]
/// bytes, from a file only this process's effective user or root could
/// have written, in directories only they can change, and closed to group
/// and others ([`private_file`]): a token another user wrote, or swapped,
/// would let that user run commands as this one.
fn read_token(path: &Path) -> anyhow::Result<String> {
    let shown = path.display();
    let file = private_file::open(path, Access::Read)
        .map_err(|error| anyhow::anyhow!("--token-file {shown}: {error}"))?;
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("--token-file {shown}: cannot read (is it UTF-8 text?)"))?;
    if text.len() as u64 > MAX_TOKEN_FILE {
        bail!("--token-file {shown}: longer than {MAX_TOKEN_FILE} bytes");
    }
    let token = text.trim();
    if token.is_empty() {
        bail!("--token-file {shown}: empty; write a token into it, e.g. openssl rand -hex 32");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "--token-file {shown}: the token must be printable ASCII without spaces, \
             e.g. openssl rand -hex 32"
        );
    }
    Ok(token.to_owned())
}

/// 32 random bytes from the kernel, as 64 hex digits.
fn random_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .context("reading /dev/urandom for a token (or pass --token-file)")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

async fn serve_until_stopped(
    transport: Transport,
    options: ServeOptions,
    parent: i32,
) -> anyhow::Result<Status> {
    let mut watch = match signals::install(&signals::SERVE, parent)? {
        Watch::Armed(watch) => watch,
        Watch::ParentGone => {
            tell!("the parent process is already gone; not serving");
            return Ok(Status::Exited(0));
        }
    };
    // The error's text already ends with its source's: shown once.
    let runner = Runner::new(options).map_err(|error| anyhow::anyhow!("{error}"))?;
    let server = CorralServer::new(runner.clone());
    let stop = CancellationToken::new();
    let serving = async {
        match transport {
            Transport::Stdio => transport::stdio(server, stop.clone()).await,
            Transport::Http {
                address,
                auth,
                generated,
            } => {
                let listener = transport::listen(address)
                    .with_context(|| format!("--http {address}: cannot listen"))?;
                let bound = listener.local_addr().context("reading the bound address")?;
                if let Some(token) = generated {
                    tell!("bearer token: {token}");
                }
                tell!("listening on http://{bound}{}", transport::PATH);
                transport::http(server, listener, auth, stop.clone()).await
            }
        }
        .map_err(anyhow::Error::new)
    };
    tokio::pin!(serving);
    let served = tokio::select! {
        served = &mut serving => served,
        signal = watch.recv() => {
            tracing::info!(%signal, "stopping");
            stop.cancel();
            // In-flight calls may still answer while their runs end.
            let (served, ()) = tokio::join!(serving, runner.shutdown());
            served
        }
    };
    stop.cancel();
    runner.shutdown().await;
    served?;
    Ok(Status::Exited(0))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn scratch(name: &str, text: &str, mode: u32) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("corral-serve-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("token");
        std::fs::write(&path, text).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn a_token_file_is_trimmed_and_must_be_private() {
        let good = scratch("good", "  s3cret-token\n", 0o600);
        assert_eq!(read_token(&good).expect("read"), "s3cret-token");
        let open = scratch("open", "s3cret\n", 0o644);
        let error = format!("{:#}", read_token(&open).expect_err("group-readable"));
        assert!(error.contains("chmod 600"), "{error}");
        let empty = scratch("empty", " \n", 0o600);
        assert!(read_token(&empty).is_err());
        let spaced = scratch("spaced", "two words", 0o600);
        assert!(read_token(&spaced).is_err());
    }

    #[test]
    fn a_random_token_is_64_hex_digits_and_differs() {
        let a = random_token().expect("token");
        let b = random_token().expect("token");
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn only_loopback_without_allow_remote() {
        let parse = |s: &str| s.parse::<SocketAddr>().expect("address");
        assert!(check_address(parse("127.0.0.1:0"), false).is_ok());
        assert!(check_address(parse("[::1]:8080"), false).is_ok());
        let error = check_address(parse("0.0.0.0:0"), false).expect_err("remote");
        assert!(error.to_string().contains("--allow-remote"), "{error}");
        assert!(check_address(parse("0.0.0.0:0"), true).is_ok());
    }
}
