//! The streamable HTTP wire (MCP 2025-03-26 and later, client side): every
//! outbound message is one `POST` to the endpoint; its answer is `202
//! Accepted`, one JSON message, or an event stream of messages.
//!
//! One writer task drains the outbound queue and the cancellations owed. It
//! never waits for an answer: it marks the request written and hands the
//! whole exchange to the reader task, which polls every exchange at once, so
//! one slow answer never holds back another frame. Giving a call up after
//! it was written closes its exchange (its response stream: the 2026-07-28
//! cancellation) and posts `notifications/cancelled` (for older servers).
//! The reader ends when the transport does: the writer is gone and no
//! exchange remains, or the server ended the session (`404`).
//!
//! No timeout but the connect's lives in the HTTP client: only a caller's
//! deadline cuts a call short, however long its answer is held.
//!
//! Against a hostile server: redirects are never followed (a `3xx` is the
//! request's error, naming where it pointed), so the headers and bodies go to
//! the given URL only; at most [`HTTP_ANSWERS_IN_FLIGHT`] answers to the
//! server's requests are on their way at once (beyond, they are dropped and
//! counted), so a server that floods requests and never takes the answers
//! holds that many connections, not one per request.

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures_util::stream::{FuturesUnordered, StreamExt};
use reqwest::{
    Client, RequestBuilder, Response, StatusCode, Url,
    header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION},
    redirect,
};
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, mpsc},
    task::JoinHandle,
    time::timeout,
};
use tokio_util::sync::CancellationToken;

use super::{
    dispatch::{cancelled_notification, dispatch},
    headers::mirror,
    options::{HTTP_ANSWERS_IN_FLIGHT, HTTP_IDLE_CONNECTIONS, HttpOptions},
    outcome::ConnectError,
    shared::{Core, Outbound, Reply, bump, lock},
    sse::{Item, Parser},
    stdio::{ReaderEnd, WriterEnd},
};
use crate::message::Id;
use crate::tasks::{self, TaskCount};

/// The JSON-RPC error code a request gets when HTTP could not deliver it or
/// the server refused it with an HTTP status.
pub(crate) const HTTP_ERROR: i64 = -32000;

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
/// How much of an error answer's body goes into the call's error message.
const ERROR_BODY: usize = 512;
/// The wait before resuming an event stream whose server set no `retry:`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Resumptions in a row that bring no new event before the answer is given
/// up as ended.
const IDLE_RESUMES: u32 = 5;
const LAST_EVENT_ID: &str = "last-event-id";
/// How much of an error answer's body is read for its JSON-RPC error.
const ERROR_BODY_JSON: usize = 64 * 1024;

/// The endpoint, and what every request to it carries.
#[derive(Debug)]
pub(crate) struct Endpoint {
    client: Client,
    url: Url,
    headers: HeaderMap,
    /// `Mcp-Session-Id`, once the server gave one.
    session: Mutex<Option<HeaderValue>>,
    /// The first transport failure (nothing reached the server), for the
    /// message of a failed connect.
    failure: Mutex<Option<String>>,
}

impl Endpoint {
    /// Checks the URL and the headers and builds the HTTP client.
    ///
    /// # Errors
    /// [`ConnectError::Http`] naming what to change.
    pub(crate) fn new(url: &str, options: &HttpOptions) -> Result<Self, ConnectError> {
        let http = |why: String| ConnectError::Http {
            url: url.to_owned(),
            why,
        };
        let parsed = Url::parse(url).map_err(|error| http(format!("not a URL ({error})")))?;
        if parsed.scheme() != "http" {
            return Err(http(format!(
                "the scheme {:?} is not supported: this build speaks plain http:// only \
                 (no TLS); put a TLS-terminating proxy in front",
                parsed.scheme()
            )));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &options.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| http(format!("{name:?} is not a valid header name")))?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                http(format!(
                    "the value of the header {name} is not valid (visible ASCII only)"
                ))
            })?;
            value.set_sensitive(true);
            headers.append(name, value);
        }
        // A redirect would carry every header (the token) and the body to
        // wherever the server points: never followed.
        let client = Client::builder()
            .redirect(redirect::Policy::none())
            .connect_timeout(options.connect_timeout)
            .pool_idle_timeout(options.pool_idle_timeout)
            .pool_max_idle_per_host(HTTP_IDLE_CONNECTIONS)
            .build()
            .map_err(|error| http(chain(&error)))?;
        Ok(Self {
            client,
            url: parsed,
            headers,
            session: Mutex::new(None),
            failure: Mutex::new(None),
        })
    }

    /// The endpoint's URL.
    pub(crate) fn url(&self) -> &str {
        self.url.as_str()
    }

    /// The first transport failure, if one happened.
    pub(crate) fn failure(&self) -> Option<String> {
        lock(&self.failure).clone()
    }

    /// The caller's headers and the session's.
    fn with_session(&self, request: RequestBuilder) -> RequestBuilder {
        let mut request = request.headers(self.headers.clone());
        if let Some(session) = lock(&self.session).clone() {
            request = request.header(SESSION, session);
        }
        request
    }

    /// The session's headers and the protocol version (a `GET` or a
    /// `DELETE`, which have no body to mirror).
    fn without_body(&self, core: &Core, request: RequestBuilder) -> RequestBuilder {
        let request = self.with_session(request);
        match core.protocol_version() {
            Some(version) => request.header(VERSION, version),
            None => request,
        }
    }

    /// A `POST` of one message, with the headers that mirror its body
    /// (`headers.rs`): the version, `Mcp-Method`, `Mcp-Name`, and the
    /// `x-mcp-header` parameters of the tool it calls.
    fn post(&self, core: &Core, body: Vec<u8>) -> RequestBuilder {
        let mut request = self
            .with_session(self.client.post(self.url.clone()))
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream");
        let frame: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let version = core.protocol_version();
        let headers = mirror(&frame, version.as_deref(), &lock(&core.tools).params);
        for (name, value) in headers {
            // Both are header-safe by construction (`headers::encode`).
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                request = request.header(name, value);
            }
        }
        request.body(body)
    }

    /// Keeps the session id of the first answer that carries one.
    fn remember_session(&self, response: &Response) {
        if let Some(session) = response.headers().get(SESSION) {
            lock(&self.session).get_or_insert_with(|| session.clone());
        }
    }

    fn has_session(&self) -> bool {
        lock(&self.session).is_some()
    }

    /// Teardown: `DELETE` the session, if there is one, within `grace`;
    /// errors are only logged (the server may be gone).
    pub(crate) async fn end_session(&self, core: &Core, grace: Duration) {
        if !self.has_session() {
            return;
        }
        let request = self.without_body(core, self.client.delete(self.url.clone()));
        match timeout(grace, request.send()).await {
            Ok(Ok(response)) => {
                tracing::debug!(status = %response.status(), "ended the HTTP session");
            }
            Ok(Err(error)) => tracing::debug!(error = chain(&error), "ending the HTTP session"),
            Err(_) => tracing::debug!(?grace, "ending the HTTP session took too long"),
        }
    }
}

/// One exchange: its request's id (none for a notification or an answer)
/// and, when it ends, a fatal reason to end the transport.
type Exchange = Pin<Box<dyn Future<Output = (Option<Id>, Option<String>)> + Send>>;

/// What the writer tells the reader.
enum ToReader {
    /// Poll this exchange; `close` ends it early.
    Exchange {
        id: Option<Id>,
        close: CancellationToken,
        run: Exchange,
    },
    /// The call of this request gave up: close its exchange.
    Close(Id),
}

/// The two tasks of an HTTP connection, and the way to open its standalone
/// stream.
#[derive(Debug)]
pub(crate) struct Started {
    pub writer: JoinHandle<WriterEnd>,
    pub reader: JoinHandle<ReaderEnd>,
    pub listener: Listener,
}

/// Opens the standalone event stream (`GET`), on which a server sends the
/// requests and notifications that answer nothing of ours (an elicitation
/// asked while a tool runs, among them). Used once, after the handshake,
/// and only by a connection that offers something the server may ask for.
#[derive(Debug)]
pub(crate) struct Listener {
    core: Arc<Core>,
    endpoint: Arc<Endpoint>,
    to_reader: mpsc::UnboundedSender<ToReader>,
    max_frame_bytes: usize,
}

impl Listener {
    /// Hands the reader the exchange that `GET`s the stream and reads it
    /// until the connection ends (resumed as an answer's stream is). The
    /// receiver hears once the server answered the `GET` (or refused it:
    /// `405` means it offers no such stream).
    pub(crate) fn open(self) -> tokio::sync::oneshot::Receiver<()> {
        let (opened, heard) = tokio::sync::oneshot::channel();
        let run = Box::pin(async move {
            let ended = listen(&self.core, &self.endpoint, self.max_frame_bytes, opened).await;
            if let Err(why) = ended {
                tracing::debug!(%why, "the standalone event stream ended");
            }
            (None, None)
        });
        let _ = self.to_reader.send(ToReader::Exchange {
            id: None,
            close: CancellationToken::new(),
            run,
        });
        heard
    }
}

/// Starts the writer and the reader.
pub(crate) fn start(
    tasks: &TaskCount,
    core: &Arc<Core>,
    queue: mpsc::Receiver<Outbound>,
    endpoint: Arc<Endpoint>,
    stop_writer: CancellationToken,
    max_frame_bytes: usize,
) -> Started {
    let (to_reader, from_writer) = mpsc::unbounded_channel();
    let listener = Listener {
        core: core.clone(),
        endpoint: endpoint.clone(),
        to_reader: to_reader.clone(),
        max_frame_bytes,
    };
    let writer = Writer {
        core: core.clone(),
        endpoint,
        to_reader,
        max_frame_bytes,
        answers: Arc::new(Semaphore::new(HTTP_ANSWERS_IN_FLIGHT)),
    };
    Started {
        writer: tasks::spawn(tasks, writer.run(queue, stop_writer)),
        reader: tasks::spawn(tasks, read(from_writer)),
        listener,
    }
}

struct Writer {
    core: Arc<Core>,
    endpoint: Arc<Endpoint>,
    to_reader: mpsc::UnboundedSender<ToReader>,
    max_frame_bytes: usize,
    /// One permit per answer to the server on its way.
    answers: Arc<Semaphore>,
}

const READER_GONE: &str = "the HTTP reader ended";

impl Writer {
    /// Posts queued frames, and the cancellations owed, until stopped or
    /// the queue closes. Never waits for an answer.
    async fn run(self, mut queue: mpsc::Receiver<Outbound>, stop: CancellationToken) -> WriterEnd {
        loop {
            let cancels = self.core.take_cancels();
            if !cancels.is_empty() {
                for (id, why) in cancels {
                    // Closing the answer's stream is the 2026-07-28
                    // cancellation; older servers want the notification.
                    if self.to_reader.send(ToReader::Close(id.clone())).is_err()
                        || !self.hand_over(None, cancelled_notification(&id, &why), None)
                    {
                        return WriterEnd::Failed(READER_GONE.into());
                    }
                }
                continue;
            }
            let next = tokio::select! {
                biased;
                () = stop.cancelled() => return WriterEnd::Stopped,
                () = self.core.wake_writer.notified() => continue,
                next = queue.recv() => next,
            };
            let Some(frame) = next else {
                return WriterEnd::QueueClosed;
            };
            if let Some(id) = &frame.request
                && !self.core.mark_written(id)
            {
                // Its call gave up before it was written: never send it.
                continue;
            }
            let permit = if frame.answer {
                // Never waits: our own requests and cancellations must not
                // queue behind answers the server holds.
                let Ok(permit) = self.answers.clone().try_acquire_owned() else {
                    tracing::debug!(
                        "dropped an answer to the server: {HTTP_ANSWERS_IN_FLIGHT} are \
                         already on their way"
                    );
                    bump(&self.core.counters.answers_dropped);
                    continue;
                };
                Some(permit)
            } else {
                None
            };
            if !self.hand_over(frame.request, frame.line, permit) {
                return WriterEnd::Failed(READER_GONE.into());
            }
        }
    }

    /// Gives the reader the exchange that posts `body` (holding `permit`,
    /// if any, until it ends); false if the reader is gone.
    fn hand_over(
        &self,
        id: Option<Id>,
        body: Vec<u8>,
        permit: Option<OwnedSemaphorePermit>,
    ) -> bool {
        let request = self.endpoint.post(&self.core, body);
        let close = CancellationToken::new();
        let closed = close.clone();
        let work = exchange(
            self.core.clone(),
            self.endpoint.clone(),
            request,
            id.clone(),
            self.max_frame_bytes,
        );
        let key = id.clone();
        let run = Box::pin(async move {
            let _permit = permit;
            tokio::select! {
                biased;
                // Dropping `work` closes the answer's stream.
                () = closed.cancelled() => (key, None),
                fatal = work => (key, fatal),
            }
        });
        self.to_reader
            .send(ToReader::Exchange { id, close, run })
            .is_ok()
    }
}

/// Polls every exchange until the writer is gone and none remains, or one
/// ends the session.
async fn read(mut from_writer: mpsc::UnboundedReceiver<ToReader>) -> ReaderEnd {
    let mut running: FuturesUnordered<Exchange> = FuturesUnordered::new();
    let mut closers: HashMap<Id, CancellationToken> = HashMap::new();
    let mut writer_gone = false;
    loop {
        if writer_gone && running.is_empty() {
            return ReaderEnd::Eof;
        }
        tokio::select! {
            next = from_writer.recv(), if !writer_gone => match next {
                Some(ToReader::Exchange { id, close, run }) => {
                    if let Some(id) = id {
                        closers.insert(id, close);
                    }
                    running.push(run);
                }
                Some(ToReader::Close(id)) => {
                    if let Some(close) = closers.remove(&id) {
                        close.cancel();
                    }
                }
                None => writer_gone = true,
            },
            Some((id, fatal)) = running.next(), if !running.is_empty() => {
                if let Some(id) = id {
                    closers.remove(&id);
                }
                if let Some(why) = fatal {
                    return ReaderEnd::Failed(why);
                }
            }
        }
    }
}

/// One `POST` and its answer: every message in it goes to [`dispatch`].
/// Returns a reason to end the transport, if the session is gone.
async fn exchange(
    core: Arc<Core>,
    endpoint: Arc<Endpoint>,
    request: RequestBuilder,
    id: Option<Id>,
    max_frame_bytes: usize,
) -> Option<String> {
    let url = endpoint.url();
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => {
            let why = format!("POST {url} failed: {}", chain(&error));
            lock(&endpoint.failure).get_or_insert_with(|| why.clone());
            match &id {
                // No connection could be opened: not a byte left.
                Some(id) if error.is_connect() => {
                    core.unsent(id, why);
                }
                // The request may have reached the server before it broke.
                Some(id) => {
                    core.unanswered(id, why);
                }
                None => refused(&core, None, why),
            }
            return None;
        }
    };
    endpoint.remember_session(&response);
    let status = response.status();
    if status == StatusCode::ACCEPTED {
        if let Some(id) = &id {
            core.unanswered(
                id,
                "the server accepted the request without answering it (HTTP 202)".into(),
            );
        }
        return None;
    }
    if status.is_redirection() {
        let why = redirected(url, status, &response);
        refused(&core, id.as_ref(), why);
        return None;
    }
    if !status.is_success() {
        let expired = status == StatusCode::NOT_FOUND && endpoint.has_session();
        let (body, rpc) = error_body(response).await;
        let why = if expired {
            format!("the server ended the session (HTTP {status} from POST {url}){body}")
        } else {
            format!("HTTP {status} from POST {url}{body}")
        };
        match (rpc, &id) {
            // The 2026-07-28 transport answers a refused request with its
            // JSON-RPC error (an unsupported version lists the supported
            // ones): the call gets that error's code and data.
            (Some(Reply::Error { code, data, .. }), Some(id)) if !expired => {
                core.settle(
                    id,
                    Reply::Error {
                        code,
                        message: why.clone(),
                        data,
                    },
                );
            }
            _ => refused(&core, id.as_ref(), why.clone()),
        }
        return expired.then_some(why);
    }
    let Some(id) = id else {
        // A notification or an answer to the server: only the status
        // matters, and a body (which the spec does not expect) is not read
        // (its connection is closed then, not reused).
        return None;
    };
    let kind = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let ended = if kind.starts_with("text/event-stream") {
        let mut parser = Parser::new(max_frame_bytes);
        let ended = events(&core, response, Some(&id), &mut parser).await;
        resume(&core, &endpoint, Some(&id), parser, ended).await
    } else if kind.starts_with("application/json") {
        json(&core, response, max_frame_bytes).await
    } else {
        let why = format!("HTTP {status} from POST {url} with Content-Type {kind:?}");
        refused(&core, Some(&id), why);
        return None;
    };
    let why = match ended {
        Ok(()) => "the server's answer ended without a response to this request".into(),
        Err(why) => format!("the server's answer broke off ({why})"),
    };
    core.unanswered(&id, why);
    None
}

/// A request HTTP could not deliver, or the server refused: its call gets
/// an error; for anything else the failure is logged and counted.
fn refused(core: &Core, id: Option<&Id>, why: String) {
    match id {
        Some(id) => {
            core.settle(
                id,
                Reply::Error {
                    code: HTTP_ERROR,
                    message: why,
                    data: None,
                },
            );
        }
        None => {
            tracing::debug!(%why, "a message to the server was not delivered");
            bump(&core.counters.http_errors);
        }
    }
}

/// After the event stream answering `id` ended (`ended`) with the call
/// still waiting: resumes it while the server gave it an event id (SSE
/// resumption, 2025-11-25 and later). Waits the server's `retry:` (else
/// [`DEFAULT_RETRY`]), then `GET`s the endpoint with `Last-Event-ID` and
/// reads that stream as the first; the request itself is never sent again.
/// Gives up after [`IDLE_RESUMES`] resumptions in a row that brought no new
/// event, or a `GET` refused; the call's own deadlines bound the whole (its
/// giving up drops this exchange). Returns how the last stream ended.
async fn resume(
    core: &Core,
    endpoint: &Endpoint,
    id: Option<&Id>,
    mut parser: Parser,
    mut ended: Result<(), String>,
) -> Result<(), String> {
    let mut idle = 0;
    while id.is_none_or(|id| core.waits_for(id)) && idle < IDLE_RESUMES {
        let Some(last) = parser.last_event_id().map(str::to_owned) else {
            break;
        };
        idle += 1;
        let wait = parser.retry().unwrap_or(DEFAULT_RETRY);
        tracing::debug!(?id, %last, ?wait, "an event stream ended: resuming it");
        tokio::time::sleep(wait).await;
        let url = endpoint.url();
        let request = endpoint
            .without_body(core, endpoint.client.get(endpoint.url.clone()))
            .header(ACCEPT, "text/event-stream")
            .header(LAST_EVENT_ID, last.as_str());
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => return Err(format!("GET {url} to resume it failed: {}", chain(&error))),
        };
        let status = response.status();
        let is_stream = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|kind| kind.to_ascii_lowercase().starts_with("text/event-stream"));
        if !status.is_success() || !is_stream {
            return Err(format!(
                "it ended, and the GET {url} to resume it after event {last:?} got HTTP {status}{}",
                if is_stream {
                    ""
                } else {
                    " without an event stream"
                }
            ));
        }
        parser = parser.resumed();
        ended = events(core, response, id, &mut parser).await;
        if parser.last_event_id() != Some(last.as_str()) {
            idle = 0;
        }
    }
    ended
}

/// The standalone stream: `GET`, then read it as an answer's stream (no
/// answer to wait for), resumed while it has event ids; `opened` fires once
/// the first `GET` is answered, whatever the answer.
async fn listen(
    core: &Core,
    endpoint: &Endpoint,
    max: usize,
    opened: tokio::sync::oneshot::Sender<()>,
) -> Result<(), String> {
    let url = endpoint.url();
    let request = endpoint
        .without_body(core, endpoint.client.get(endpoint.url.clone()))
        .header(ACCEPT, "text/event-stream");
    let sent = request.send().await;
    let _ = opened.send(());
    let response = sent.map_err(|error| format!("GET {url} failed: {}", chain(&error)))?;
    let status = response.status();
    let is_stream = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|kind| kind.to_ascii_lowercase().starts_with("text/event-stream"));
    if !status.is_success() || !is_stream {
        return Err(format!("GET {url}: HTTP {status}, no event stream"));
    }
    let mut parser = Parser::new(max);
    let ended = events(core, response, None, &mut parser).await;
    resume(core, endpoint, None, parser, ended).await
}

/// A `text/event-stream` answer to the request `id` (`None`: the standalone
/// stream): each event's data is one message. Read until `id` is settled
/// (then the stream is dropped, whatever the server keeps sending) or the
/// stream ends.
async fn events(
    core: &Core,
    mut response: Response,
    id: Option<&Id>,
    parser: &mut Parser,
) -> Result<(), String> {
    while let Some(chunk) = response.chunk().await.map_err(|error| chain(&error))? {
        for item in parser.feed(&chunk) {
            match item {
                Item::Event(event) if event.data.iter().all(u8::is_ascii_whitespace) => {}
                Item::Event(event) => dispatch(core, &event.data),
                Item::TooLong { len } => {
                    tracing::debug!(len, "dropped an over-long event from the server");
                    bump(&core.counters.too_long);
                }
            }
        }
        if id.is_some_and(|id| !core.waits_for(id)) {
            return Ok(());
        }
    }
    Ok(())
}

/// An `application/json` answer: one message.
async fn json(core: &Core, mut response: Response, max: usize) -> Result<(), String> {
    let mut body = Vec::new();
    let mut len = 0usize;
    while let Some(chunk) = response.chunk().await.map_err(|error| chain(&error))? {
        len += chunk.len();
        if len <= max {
            body.extend_from_slice(&chunk);
        }
    }
    if len > max {
        tracing::debug!(len, "dropped an over-long answer from the server");
        bump(&core.counters.too_long);
    } else if !body.iter().all(u8::is_ascii_whitespace) {
        dispatch(core, &body);
    }
    Ok(())
}

/// The error of a request the server answered with a redirect: never
/// followed, it names the status and where it pointed (escaped, cut short).
fn redirected(url: &str, status: StatusCode, response: &Response) -> String {
    let location = response.headers().get(LOCATION).map_or_else(
        || "nowhere (no Location)".to_owned(),
        |value| {
            let text = String::from_utf8_lossy(value.as_bytes());
            let cut: String = text.chars().take(ERROR_BODY).collect();
            format!("{cut:?}")
        },
    );
    format!(
        "the server answered HTTP {status} to POST {url}, redirecting to {location}; \
         corral does not follow redirects (they would carry the headers and the body \
         elsewhere): give the final URL"
    )
}

/// The start of an error answer's body, for the call's message, and the
/// JSON-RPC error it holds, if it is one (read up to
/// [`ERROR_BODY_JSON`] bytes).
async fn error_body(mut response: Response) -> (String, Option<Reply>) {
    let mut body = Vec::new();
    while body.len() < ERROR_BODY_JSON {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    let rpc = rpc_error(&body);
    body.truncate(ERROR_BODY);
    let text = String::from_utf8_lossy(&body);
    let text = text.trim();
    let text = if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    };
    (text, rpc)
}

/// The error of a JSON-RPC error response, if `body` is one.
fn rpc_error(body: &[u8]) -> Option<Reply> {
    let frame: serde_json::Value = serde_json::from_slice(body).ok()?;
    let error = frame.get("error")?;
    Some(Reply::Error {
        code: error.get("code")?.as_i64()?,
        message: error.get("message")?.as_str()?.to_owned(),
        data: error.get("data").cloned(),
    })
}

/// An error and its sources, one sentence (reqwest's own message names
/// only the outermost step).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
