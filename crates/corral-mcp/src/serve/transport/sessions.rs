//! Legacy (`initialize`) sessions on HTTP: rmcp's local sessions, with an
//! idle expiry and a cap on how many live at once.

use std::{sync::Arc, time::Duration};

use futures_util::Stream;
use rmcp::{
    model::{ClientJsonRpcMessage, ServerJsonRpcMessage},
    transport::{
        WorkerTransport,
        streamable_http_server::session::{
            ServerSseMessage, SessionId, SessionManager,
            local::{LocalSessionManager, LocalSessionManagerError, LocalSessionWorker},
        },
    },
};

/// Why a session was not created or used.
#[derive(Debug, thiserror::Error)]
pub(super) enum SessionsError {
    /// The cap is reached.
    #[error(
        "{0} sessions are live, the most this server keeps: wait until one ends (a session \
         idle for {1:?} ends) or use protocol 2026-07-28, which needs no session"
    )]
    Full(usize, Duration),
    /// rmcp's own.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// rmcp's [`LocalSessionManager`] with a cap: beyond `max` live sessions,
/// `initialize` is refused (HTTP 500 naming the cap) until one ends. A
/// session ends after `idle` without a message (rmcp's `keep_alive`), on
/// `DELETE`, or when the server stops.
pub(super) struct Sessions {
    local: LocalSessionManager,
    max: usize,
    /// Creations one at a time: the count and the insert are one step.
    creating: tokio::sync::Mutex<()>,
}

impl Sessions {
    pub(super) fn new(max: usize, idle: Duration) -> Arc<Self> {
        let mut local = LocalSessionManager::default();
        local.session_config.keep_alive = Some(idle);
        Arc::new(Self {
            local,
            max,
            creating: tokio::sync::Mutex::new(()),
        })
    }
}

impl Sessions {
    /// The ids of the sessions live now.
    pub(super) async fn live(&self) -> std::collections::HashSet<SessionId> {
        self.local.sessions.read().await.keys().cloned().collect()
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = WorkerTransport<LocalSessionWorker>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let _one = self.creating.lock().await;
        let live = self.local.sessions.read().await.len();
        if live >= self.max {
            let idle = self
                .local
                .session_config
                .keep_alive
                .unwrap_or(Duration::MAX);
            return Err(SessionsError::Full(live, idle));
        }
        Ok(self.local.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.local.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.local.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        Ok(self.local.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.local.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.local.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests;
