//! The one teardown every exit path of a connection reaches, and what it
//! reports.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use corral::{Control, Finished};
use tokio::{
    task::JoinHandle,
    time::{Instant, timeout},
};
use tokio_util::sync::CancellationToken;

use crate::client::{
    http::Endpoint,
    options::ConnectOptions,
    outcome::Ended,
    shared::{Core, ReadStats},
    stdio::{ReaderEnd, WriterEnd},
};

/// How long the server's output is still read once its tree is gone (every
/// writer is gone then, so end of file comes at once unless a survivor holds
/// the pipe).
pub(super) const DRAIN: Duration = Duration::from_millis(250);

/// What the teardown did.
///
/// ```
/// use corral_mcp::client::Teardown;
///
/// fn report(teardown: &Teardown) -> String {
///     let survivors = teardown.finished.as_ref().map_or(0, |finished| finished.report.survivors.len());
///     format!("{} after {:?}: {} frames dropped, {survivors} survivors", teardown.ended, teardown.took, teardown.stats.dropped())
/// }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Teardown {
    /// What started it.
    pub ended: Ended,
    /// The server's tree: how it ended and what the cleanup did (`None` for
    /// a connection over bare streams, or a server that never started).
    pub finished: Option<Finished>,
    /// What the reader read, dropped and answered.
    pub stats: ReadStats,
    /// How long the teardown took.
    pub took: Duration,
}

pub(super) type Waiting = Pin<Box<dyn Future<Output = Result<Finished, corral::Error>> + Send>>;

/// The server's tree while the connection holds it.
pub(super) struct Tree {
    pub(super) control: Control,
    pub(super) wait: Waiting,
    pub(super) finished: Option<Finished>,
}

/// Everything the teardown ends.
pub(super) struct Parts {
    pub(super) core: Arc<Core>,
    pub(super) stop_writer: CancellationToken,
    pub(super) writer: Option<JoinHandle<WriterEnd>>,
    pub(super) reader: Option<JoinHandle<ReaderEnd>>,
    pub(super) tree: Option<Tree>,
    pub(super) supervise_failed: Option<String>,
    /// The HTTP endpoint, whose session the teardown ends.
    pub(super) http: Option<Arc<Endpoint>>,
}

/// The one teardown. Not cancellable half-way: it runs in the supervisor
/// task, which nothing aborts.
pub(super) async fn teardown(parts: &mut Parts, why: Ended, options: &ConnectOptions) -> Teardown {
    let started = Instant::now();
    tracing::debug!(%why, "tearing the connection down");
    // No new frame; every waiting call hears why.
    parts.core.close(&why);
    // The writer stops and drops the server's stdin: the MCP shutdown's
    // first step.
    parts.stop_writer.cancel();
    if let Some(writer) = parts.writer.take() {
        let _ = writer.await;
    }
    // HTTP: end the session, then close every open answer (aborting the
    // reader drops its exchanges).
    if let Some(endpoint) = parts.http.as_ref() {
        endpoint.end_session(&parts.core, options.close_grace).await;
        if let Some(exchanges) = parts.reader.take() {
            exchanges.abort();
            let _ = exchanges.await;
        }
    }
    // Wait for the server to exit, then end whatever is left of its tree.
    if let Some(tree) = parts.tree.as_mut()
        && tree.finished.is_none()
        && parts.supervise_failed.is_none()
    {
        let result = match timeout(options.close_grace, &mut tree.wait).await {
            Ok(result) => result,
            Err(_) => {
                tracing::debug!("the server outlived its stdin: ending its tree");
                tree.control.terminate();
                (&mut tree.wait).await
            }
        };
        match result {
            Ok(finished) => tree.finished = Some(finished),
            Err(error) => parts.supervise_failed = Some(error.to_string()),
        }
    }
    // The reader: with the tree gone every writer of the pipe is gone, so
    // end of file comes at once; a pipe held elsewhere is cut off.
    if let Some(mut reader) = parts.reader.take() {
        let drain = if parts.tree.is_some() {
            DRAIN
        } else {
            options.close_grace
        };
        if timeout(drain, &mut reader).await.is_err() {
            reader.abort();
            let _ = reader.await;
        }
    }
    Teardown {
        ended: parts.core.ended().unwrap_or(why),
        finished: parts.tree.as_mut().and_then(|tree| tree.finished.take()),
        stats: parts.core.stats(),
        took: started.elapsed(),
    }
}
