//! The handshake, for both protocol eras, each step under its own deadline
//! and both under the handshake's (`ConnectOptions::handshake_timeout`), if
//! set: a step gets the lesser of its own deadline and what is left of the
//! handshake's, so a server silent on both steps is given up when the
//! handshake's deadline passes, not after the sum of the steps'.
//!
//! 1. `server/discover` (2026-07-28), unless the caller knows the server is
//!    legacy. A discovery result that offers a version this client speaks
//!    ends the handshake: every later request carries the protocol version
//!    and the client's identity in its `_meta`. A discovery refused as an
//!    unsupported version (`-32022`) whose `data.supported` lists 2026-07-28
//!    is asked once more (with a fresh id).
//! 2. Otherwise `initialize` (2025-11-25 and earlier), then
//!    `notifications/initialized`. The fallback is not keyed to one error
//!    code: *any* JSON-RPC error, an answer that is not a discovery result,
//!    or silence until the discovery deadline means "legacy". Only a
//!    connection that ended (or a request that could not be written) fails
//!    the handshake at this step. Silence is not a final answer: the
//!    discovery stays open while `initialize` is tried, and if it is answered
//!    first (a modern server still starting reads it first, then refuses
//!    `initialize`), or `initialize` fails and it is answered after, its
//!    answer decides the era.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use rmcp::model::{
    DiscoverResult, Implementation, InitializeResult, ProtocolVersion, ServerCapabilities,
    TASKS_EXTENSION_ID,
};
use serde_json::{Map, Value, json};

use super::{
    options::{CallOptions, ConnectOptions},
    outcome::CallError,
    shared::Core,
};

/// The version of the discovery era this client speaks.
pub const MODERN: &str = "2026-07-28";
/// The version this client asks for in `initialize`.
pub const LEGACY: &str = "2025-11-25";
/// The JSON-RPC error of a request in a protocol version the server does
/// not implement (2026-07-28); its `data.supported` lists those it does.
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// Versions this client accepts in an `initialize` answer.
const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Which handshake the server answered.
///
/// ```
/// use corral_mcp::client::Era;
///
/// assert_eq!(serde_json::to_value(Era::Initialize)?, "initialize");
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Era {
    /// `server/discover` (2026-07-28).
    Discover,
    /// `initialize` (2025-11-25 and earlier).
    Initialize,
}

/// What the handshake learnt about the server.
///
/// ```
/// use corral_mcp::client::PeerInfo;
///
/// fn describe(peer: &PeerInfo) -> String {
///     let name = peer.server_info.as_ref().map_or("?", |info| info.name.as_str());
///     let tools = peer.capabilities.tools.is_some();
///     format!("{name} ({:?}, {}), tools: {tools}", peer.era, peer.protocol_version)
/// }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PeerInfo {
    /// Which handshake it answered.
    pub era: Era,
    /// The protocol version in use.
    pub protocol_version: ProtocolVersion,
    /// Its name and version, when it said.
    pub server_info: Option<Implementation>,
    /// What it offers.
    pub capabilities: ServerCapabilities,
    /// Its instructions, if any.
    pub instructions: Option<String>,
}

/// Runs the handshake on a connection whose writer and reader run.
///
/// # Errors
/// A sentence saying which step failed and why.
pub(crate) async fn handshake(
    core: &Arc<Core>,
    options: &ConnectOptions,
) -> Result<PeerInfo, String> {
    let client_info = json!({"name": options.client_name, "version": options.client_version});
    let capabilities = if options.elicitation.is_some() {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    let deadline = Deadline::new(options.handshake_timeout);
    let discover_options = CallOptions::timeout(
        deadline.cut(
            options
                .discover_timeout
                .saturating_add(options.initialize_timeout),
        ),
    );
    // A discovery still unanswered at its own deadline, kept open.
    let mut open_discovery = None;
    if !options.legacy_only {
        let mut modern = capabilities.clone();
        if options.tasks {
            modern["extensions"] = json!({ TASKS_EXTENSION_ID: {} });
        }
        let meta = discover_meta(&client_info, &modern);
        let params = json!({"_meta": Value::Object(meta.clone())});
        // Open until the initialize step's deadline too: a modern server
        // still starting reads it first once it runs, answers it late, and
        // then refuses `initialize` on this connection (docs/flakes.md (20)).
        let mut discover = Box::pin(async {
            let first = core
                .request("server/discover", Some(params.clone()), &discover_options)
                .await;
            match first {
                // Refused with the versions the server speaks, ours among
                // them (a server that turned down the first try): asked
                // once more, under a fresh id, within what is left.
                Err(CallError::Rpc {
                    code: UNSUPPORTED_PROTOCOL_VERSION,
                    ref data,
                    ..
                }) if offers(data.as_ref(), MODERN) => {
                    tracing::debug!(
                        "server/discover: refused with {MODERN} among the supported versions: asking again"
                    );
                    let again = CallOptions::timeout(
                        deadline.cut(
                            options
                                .discover_timeout
                                .saturating_add(options.initialize_timeout),
                        ),
                    );
                    core.request("server/discover", Some(params), &again).await
                }
                other => other,
            }
        });
        tokio::select! {
            biased;
            answered = &mut discover => {
                if let Some(peer) = discovered(core, meta, answered)? {
                    return Ok(peer);
                }
            }
            () = tokio::time::sleep(deadline.cut(options.discover_timeout)) => {
                tracing::debug!("server/discover: no answer yet: trying initialize, the discovery kept open");
                open_discovery = Some((discover, meta));
            }
        }
    }
    let params = json!({
        "protocolVersion": LEGACY,
        "capabilities": capabilities,
        "clientInfo": client_info,
    });
    let own = deadline.cut(options.initialize_timeout);
    if own.is_zero() {
        return Err(format!(
            "initialize: not sent: the handshake's deadline ({}) passed during server/discover",
            deadline.said()
        ));
    }
    let step = CallOptions::timeout(own);
    let asked = Instant::now();
    let initialize = core.request("initialize", Some(params), &step);
    let result = match open_discovery {
        None => initialize.await,
        Some((mut discover, meta)) => {
            tokio::pin!(initialize);
            tokio::select! {
                biased;
                answered = &mut discover => {
                    if let Some(peer) = discovered(core, meta, answered)? {
                        return Ok(peer);
                    }
                    initialize.await
                }
                result = &mut initialize => match result {
                    Ok(result) => Ok(result),
                    // Refused, or unanswered: a modern server that read the
                    // discovery first refuses `initialize`, and its late
                    // discovery answer decides.
                    Err(error) => match discovered(core, meta, discover.await) {
                        Ok(Some(peer)) => return Ok(peer),
                        Ok(None) | Err(_) => Err(error),
                    },
                },
            }
        }
    };
    let result = result.map_err(|error| match error {
        CallError::OutcomeUnknown { .. }
            if deadline.is_set() && core.ended().is_none() && asked.elapsed() >= own =>
        {
            format!(
                "initialize: no answer within {}: the handshake's deadline of {} passed \
                 (server/discover and initialize share it; server/discover used {})",
                secs(own),
                deadline.said(),
                secs(asked.duration_since(deadline.started))
            )
        }
        error => format!("initialize: {error}"),
    })?;
    let result: InitializeResult = serde_json::from_value(result)
        .map_err(|error| format!("initialize: the answer is not an initialize result ({error})"))?;
    if !LEGACY_VERSIONS.contains(&result.protocol_version.as_str()) {
        return Err(format!(
            "initialize: the server speaks protocol version {}, which this client does not \
             (it speaks {MODERN} and {})",
            result.protocol_version.as_str(),
            LEGACY_VERSIONS.join(", ")
        ));
    }
    core.set_protocol_version(result.protocol_version.as_str());
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let sent = serde_json::to_vec(&initialized).is_ok_and(|line| core.try_send(line));
    if !sent {
        return Err("initialize: the connection closed before notifications/initialized".into());
    }
    Ok(PeerInfo {
        era: Era::Initialize,
        protocol_version: result.protocol_version,
        server_info: Some(result.server_info),
        capabilities: result.capabilities,
        instructions: result.instructions,
    })
}

/// The `_meta` of the 2026-07-28 era: the version, who the client is and
/// what it offers.
fn discover_meta(client_info: &Value, capabilities: &Value) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        "io.modelcontextprotocol/protocolVersion".into(),
        json!(MODERN),
    );
    meta.insert(
        "io.modelcontextprotocol/clientInfo".into(),
        client_info.clone(),
    );
    meta.insert(
        "io.modelcontextprotocol/clientCapabilities".into(),
        capabilities.clone(),
    );
    meta
}

/// What the answer to `server/discover` means: the modern era
/// (`Ok(Some)`, and every later request carries `meta`), a fallback to
/// `initialize` (`Ok(None)`: any JSON-RPC error, an answer that is not a
/// usable discovery result, or no answer), or a connection that cannot go
/// on.
fn discovered(
    core: &Core,
    meta: Map<String, Value>,
    answered: Result<Value, CallError>,
) -> Result<Option<PeerInfo>, String> {
    match answered {
        Ok(result) => match modern(result) {
            Ok(peer) => {
                core.set_meta(meta);
                core.set_protocol_version(peer.protocol_version.as_str());
                Ok(Some(peer))
            }
            Err(why) => {
                tracing::debug!(%why, "server/discover: falling back to initialize");
                Ok(None)
            }
        },
        Err(error @ CallError::NotSent { .. }) => Err(format!("server/discover: {error}")),
        Err(error @ CallError::OutcomeUnknown { .. }) if core.ended().is_some() => {
            Err(format!("server/discover: {error}"))
        }
        Err(error) => {
            tracing::debug!(%error, "server/discover: falling back to initialize");
            Ok(None)
        }
    }
}

/// Whether the `data` of an unsupported-version error lists `version` in
/// its `supported` versions.
fn offers(data: Option<&Value>, version: &str) -> bool {
    data.and_then(|data| data.get("supported"))
        .and_then(Value::as_array)
        .is_some_and(|supported| supported.iter().any(|v| v.as_str() == Some(version)))
}

/// The handshake's deadline, when it has one.
struct Deadline {
    started: Instant,
    whole: Option<Duration>,
}

impl Deadline {
    fn new(whole: Option<Duration>) -> Self {
        Self {
            started: Instant::now(),
            whole,
        }
    }

    /// A step's own deadline `own`, cut to what is left of the handshake's.
    fn cut(&self, own: Duration) -> Duration {
        self.whole.map_or(own, |whole| {
            own.min(whole.saturating_sub(self.started.elapsed()))
        })
    }

    fn is_set(&self) -> bool {
        self.whole.is_some()
    }

    /// The whole deadline, for messages.
    fn said(&self) -> String {
        self.whole.map_or_else(|| "none".into(), secs)
    }
}

/// A duration in seconds, for messages.
fn secs(duration: Duration) -> String {
    format!("{:.3} s", duration.as_secs_f64())
}

/// A discovery result this client can use, or why not.
fn modern(result: Value) -> Result<PeerInfo, String> {
    let result: DiscoverResult = serde_json::from_value(result)
        .map_err(|error| format!("not a discovery result ({error})"))?;
    if !result
        .supported_versions
        .iter()
        .any(|v| v.as_str() == MODERN)
    {
        return Err(format!(
            "the server offers {:?}, not {MODERN}",
            result
                .supported_versions
                .iter()
                .map(ProtocolVersion::as_str)
                .collect::<Vec<_>>()
        ));
    }
    Ok(PeerInfo {
        era: Era::Discover,
        protocol_version: ProtocolVersion::V_2026_07_28,
        server_info: result.server_info(),
        capabilities: result.capabilities,
        instructions: result.instructions,
    })
}

#[cfg(test)]
mod tests;
