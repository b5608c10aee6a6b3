//! Named connections: connect, adopt, disconnect, shut down, and reconnect a
//! server that crashed, within a budget ([`reconnect`](self) has the rules).
//!
//! Every name is a slot. A slot and each connection in it get ids from one
//! manager-wide counter, so a late teardown of an old connection (or a
//! reconnect sequence of a slot that was replaced) can never touch the slot
//! that holds the name now. A connect holds its slot's flight lock until it
//! is installed or failed, so a call made meanwhile waits for it instead of
//! starting servers of its own. `shutdown` cancels every connect and
//! reconnect under way and returns only once every task of the manager
//! ended: every server's whole tree is gone then.

mod reconnect;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{
    Arc, Mutex, Weak,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value};
use tokio::{sync::OwnedMutexGuard, time::Instant};
use tokio_util::sync::CancellationToken;

use super::{
    connection::{Called, Connection, Launch, OnEnd, Owner, Teardown, open},
    options::{CallOptions, ConnectOptions, HttpOptions},
    outcome::{CallError, ConnectError, Ended},
    shared::lock,
    task::Step,
};
use crate::tasks::TaskCount;

#[cfg(test)]
use super::options::backoff;

/// How to reach a server again (what the manager keeps to reconnect).
///
/// ```
/// use corral_mcp::client::{HttpOptions, Server};
///
/// let mut command = corral::Command::new("uvx");
/// command.arg("mcp-server-git");
/// let git = Server::Stdio(command);
/// let remote = Server::Http { url: "http://127.0.0.1:8765/mcp".into(), options: HttpOptions::default() };
/// # let _ = (git, remote);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
// One per name, kept for reconnects: its size does not matter, and boxing
// the command would make every caller write `Box::new`.
#[allow(clippy::large_enum_variant)]
pub enum Server {
    /// A stdio server spawned as an owned tree.
    Stdio(corral::Command),
    /// A streamable HTTP endpoint (see [`Connection::http`]).
    Http {
        /// The endpoint's URL.
        url: String,
        /// Headers and connection bounds.
        options: HttpOptions,
    },
}

/// The state of one name.
#[derive(Debug)]
enum State {
    /// Its first connect is under way (and holds the flight lock).
    Connecting,
    /// Connected: since when, and how much of the budget the reconnects
    /// that led to it spent.
    Live(Arc<Connection>, Instant, u32),
    /// The server crashed; `spent` attempts of the budget are used.
    Crashed { spent: u32, why: Ended },
    /// The budget is spent.
    Failed { attempts: u32, last: String },
}

#[derive(Debug)]
struct Slot {
    /// Which slot this is (a name may be reused by another slot later).
    id: u64,
    /// How to start the server again; `None` for an adopted one.
    server: Option<Server>,
    options: ConnectOptions,
    state: State,
    /// Which connection of this slot is current.
    generation: u64,
    /// Held by a connect, or by one reconnect sequence, for its whole run.
    flight: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug, Default)]
struct Inner {
    slots: Mutex<HashMap<String, Slot>>,
    shut: AtomicBool,
    /// Cancelled by `shutdown` and by the manager's drop: every connect,
    /// reconnect and connection of the manager ends.
    closing: CancellationToken,
    /// Ids of slots and connections.
    next: AtomicU64,
}

impl Inner {
    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn is_shut(&self) -> bool {
        self.shut.load(Ordering::SeqCst)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.closing.cancel();
    }
}

/// Named connections to MCP servers. Dropping the manager ends every
/// connection (each tears down in its own task); [`Manager::shutdown`] also
/// waits for them.
///
/// ```
/// use corral_mcp::client::{ConnectError, Manager};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let manager = Manager::new();
/// assert!(manager.connected().is_empty());
/// assert!(!manager.contains("git") && manager.get("git").is_none());
/// assert!(matches!(manager.disconnect("git").await, Err(ConnectError::Unknown(_))));
/// assert!(manager.shutdown().await.is_empty());
/// assert_eq!((manager.live_tasks(), manager.task_count().live()), (0, 0));
/// # }
/// ```
///
/// With servers:
///
/// ```no_run
/// use corral_mcp::client::{CallOptions, ConnectOptions, Manager, Server};
///
/// # async fn demo(manager: Manager) -> Result<(), Box<dyn std::error::Error>> {
/// let mut command = corral::Command::new("uvx");
/// command.arg("mcp-server-git");
/// manager.connect("git", Server::Stdio(command), ConnectOptions::default()).await?;
/// let tools = manager.list_tools("git", &CallOptions::default()).await?;
/// let result = manager.call_tool("git", &tools[0].name, None, &CallOptions::default()).await?;
/// // The connection, started again if the server crashed (bounded, single-flight).
/// let connection = manager.live("git").await?;
/// let again = manager.reconnect("git").await?;
///
/// let mut command = corral::Command::new("npx");
/// command.args(["-y", "@modelcontextprotocol/server-everything"]);
/// command.stdin(corral::Stdio::Piped).stdout(corral::Stdio::Piped);
/// manager.adopt("everything", command.spawn()?, ConnectOptions::default()).await?;
/// # let _ = (result, connection, again);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Manager {
    inner: Arc<Inner>,
    tasks: TaskCount,
}

impl Manager {
    /// An empty manager.
    pub fn new() -> Self {
        Self::default()
    }

    /// The manager's tasks alive now (writers, readers, supervisors).
    pub fn live_tasks(&self) -> usize {
        self.tasks.live()
    }

    /// The count behind [`Manager::live_tasks`], which outlives the manager
    /// (to see its connections' tasks finish after it was dropped).
    pub fn task_count(&self) -> TaskCount {
        self.tasks.clone()
    }

    /// Names with a live connection now.
    pub fn connected(&self) -> Vec<String> {
        let slots = lock(&self.inner.slots);
        let mut names: Vec<String> = slots
            .iter()
            .filter(|(_, slot)| matches!(slot.state, State::Live(..)))
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    /// Whether `name` is known at all (connecting, live, crashed or failed).
    pub fn contains(&self, name: &str) -> bool {
        lock(&self.inner.slots).contains_key(name)
    }

    /// The live connection of `name`, if any.
    pub fn get(&self, name: &str) -> Option<Arc<Connection>> {
        match &lock(&self.inner.slots).get(name)?.state {
            State::Live(connection, ..) => Some(connection.clone()),
            _ => None,
        }
    }

    /// Connects `name` to `server`.
    ///
    /// # Errors
    /// [`ConnectError`]; nothing of the server is left running after one.
    ///
    /// # Cancel safety
    /// Dropping the future (or cancelling `options.cancel`) tears the new
    /// connection down; the name is free again.
    pub async fn connect(
        &self,
        name: &str,
        server: Server,
        options: ConnectOptions,
    ) -> Result<Arc<Connection>, ConnectError> {
        let (slot, _flight) = self.reserve(name, Some(server.clone()), &options).await?;
        let mut reservation = Reservation {
            inner: &self.inner,
            name,
            slot,
            armed: true,
        };
        let connection = self.start(name, slot, &server, options, 0).await?;
        reservation.armed = false;
        Ok(connection)
    }

    /// Adopts a server the caller spawned with corral (see
    /// [`Connection::adopt`]). An adopted server is not reconnected.
    ///
    /// # Errors
    /// As [`Manager::connect`].
    pub async fn adopt(
        &self,
        name: &str,
        child: corral::Child,
        options: ConnectOptions,
    ) -> Result<Arc<Connection>, ConnectError> {
        let mut options = options;
        options.reconnect.attempts = 0;
        let (slot, _flight) = self.reserve(name, None, &options).await?;
        let mut reservation = Reservation {
            inner: &self.inner,
            name,
            slot,
            armed: true,
        };
        let connection = self
            .open_in(name, slot, Launch::Adopt(child), options, 0)
            .await?;
        reservation.armed = false;
        Ok(connection)
    }

    /// Takes `name` for a new slot (connecting), with its flight lock held.
    async fn reserve(
        &self,
        name: &str,
        server: Option<Server>,
        options: &ConnectOptions,
    ) -> Result<(u64, OwnedMutexGuard<()>), ConnectError> {
        if self.inner.is_shut() {
            return Err(ConnectError::ShutDown);
        }
        let flight = Arc::new(tokio::sync::Mutex::new(()));
        // Nobody else knows this lock yet: taken at once.
        let guard = flight.clone().lock_owned().await;
        let mut slots = lock(&self.inner.slots);
        if slots.contains_key(name) {
            return Err(ConnectError::NameTaken(name.into()));
        }
        let id = self.inner.next();
        slots.insert(
            name.into(),
            Slot {
                id,
                server,
                options: options.clone(),
                state: State::Connecting,
                generation: 0,
                flight,
            },
        );
        Ok((id, guard))
    }

    /// Calls a tool on `name`, reconnecting first if its server crashed
    /// (within the budget). Never retries the call itself.
    ///
    /// A call that runs as a task ([`ConnectOptions::tasks`]) survives a
    /// lost connection: a poll that gets no answer is asked again after a
    /// backoff, on the live connection of `name` (reconnected first if it
    /// ended, within the budget), up to [`Reconnect::attempts`](super::Reconnect::attempts)
    /// polls in a row, so the call ends with the run's real outcome. It ends
    /// [`CallError::Task`] with [`TaskEnd::Lost`](super::TaskEnd::Lost) only
    /// when the task cannot be found again, saying why.
    ///
    /// # Errors
    /// [`CallError`]; a connection that cannot be had is
    /// [`CallError::NotSent`] with the reason.
    ///
    /// # Cancel safety
    /// As [`Connection::call_tool`]; dropping it during a reconnect leaves
    /// the reconnect to the next caller (and queues the `tasks/cancel` of a
    /// task it followed on the connection it last used).
    pub async fn call_tool(
        &self,
        name: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        options: &CallOptions,
    ) -> Result<CallToolResult, CallError> {
        let connection = self.live(name).await.map_err(|error| CallError::NotSent {
            reason: error.to_string(),
        })?;
        let mut follow = match connection.start_call(tool, arguments, options).await? {
            Called::Done(result) => return Ok(result),
            Called::Task(follow) => follow,
        };
        loop {
            let why = match follow.step().await {
                Step::Done(done) => return done,
                Step::Lost(why) => why,
            };
            follow.after_lost(&why).await?;
            match self.live(name).await {
                Ok(connection) => connection.adopt_follow(&mut follow),
                Err(error) => {
                    return Err(follow.lost(format!(
                        "a poll got no answer ({why}), and no connection to {name:?} could be \
                         had again: {error}"
                    )));
                }
            }
        }
    }

    /// Lists the tools of `name` (reconnecting as [`Manager::call_tool`]).
    ///
    /// # Errors
    /// As [`Manager::call_tool`].
    pub async fn list_tools(
        &self,
        name: &str,
        options: &CallOptions,
    ) -> Result<Vec<Tool>, CallError> {
        let connection = self.live(name).await.map_err(|error| CallError::NotSent {
            reason: error.to_string(),
        })?;
        connection.list_tools(options).await
    }

    /// Opens one connection for `name` from `server` and installs it.
    async fn start(
        &self,
        name: &str,
        slot: u64,
        server: &Server,
        options: ConnectOptions,
        spent: u32,
    ) -> Result<Arc<Connection>, ConnectError> {
        let launch = match server {
            Server::Stdio(command) => Launch::Spawn(command.clone()),
            Server::Http { url, options } => Launch::Http {
                url: url.clone(),
                options: options.clone(),
            },
        };
        self.open_in(name, slot, launch, options, spent).await
    }

    /// Opens a connection as the next one of slot `slot` and installs it;
    /// if the slot is gone meanwhile, the connection is closed again.
    async fn open_in(
        &self,
        name: &str,
        slot: u64,
        launch: Launch,
        options: ConnectOptions,
        spent: u32,
    ) -> Result<Arc<Connection>, ConnectError> {
        let generation = self.inner.next();
        if !self.update(name, slot, |s| s.generation = generation) {
            return Err(self.superseded(name));
        }
        let owner = Owner {
            tasks: self.tasks.clone(),
            on_end: Some(self.on_end(name, generation)),
            stop: self.inner.closing.clone(),
        };
        let connection = Arc::new(open(launch, options, owner).await?);
        if !self.install(name, slot, generation, &connection, spent) {
            connection.close_for(Ended::Disconnected).await;
            return Err(self.superseded(name));
        }
        Ok(connection)
    }

    /// Why a slot's connect or reconnect stopped: shut down, or the name was
    /// disconnected (and maybe taken again) meanwhile.
    fn superseded(&self, name: &str) -> ConnectError {
        if self.inner.is_shut() {
            ConnectError::ShutDown
        } else {
            ConnectError::Superseded(name.into())
        }
    }

    /// Applies `change` to slot `slot` of `name`; false if that slot is gone.
    fn update(&self, name: &str, slot: u64, change: impl FnOnce(&mut Slot)) -> bool {
        match lock(&self.inner.slots).get_mut(name) {
            Some(current) if current.id == slot => {
                change(current);
                true
            }
            _ => false,
        }
    }

    /// Makes `connection` the live one of its slot; false if the slot moved
    /// on or the manager shut down.
    fn install(
        &self,
        name: &str,
        slot: u64,
        generation: u64,
        connection: &Arc<Connection>,
        spent: u32,
    ) -> bool {
        if self.inner.is_shut() {
            return false;
        }
        self.update(name, slot, |current| {
            if current.generation == generation {
                current.state = match connection.ended() {
                    // It died between its handshake and now: its teardown
                    // found the slot not live yet, so it is crashed here.
                    Some(why) => State::Crashed { spent, why },
                    None => State::Live(connection.clone(), Instant::now(), spent),
                };
            }
        })
    }

    /// What a connection's teardown does to its slot: a crash keeps the
    /// name for a reconnect (spending the budget unless the connection was
    /// stable); any other ending removes the name. Only while the slot still
    /// holds this very connection.
    fn on_end(&self, name: &str, generation: u64) -> OnEnd {
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        let name = name.to_owned();
        Box::new(move |teardown: &Teardown| {
            let Some(inner) = inner.upgrade() else { return };
            let mut slots = lock(&inner.slots);
            let Some(slot) = slots.get_mut(&name) else {
                return;
            };
            if slot.generation != generation {
                return;
            }
            let crashed = matches!(
                teardown.ended,
                Ended::ReadLoopEnded(_) | Ended::ServerExited(_) | Ended::WriteFailed(_)
            );
            match (&slot.state, crashed) {
                (State::Live(_, since, spent), true) => {
                    // A crash soon after the handshake keeps the budget
                    // spent so far; a stable connection earned a fresh one.
                    let spent = if since.elapsed() >= slot.options.reconnect.stable_after {
                        0
                    } else {
                        *spent
                    };
                    slot.state = State::Crashed {
                        spent,
                        why: teardown.ended.clone(),
                    };
                }
                (State::Live(..), false) => {
                    slots.remove(&name);
                }
                // Not live yet: `install` sees the ending and decides.
                _ => {}
            }
        })
    }

    /// Closes `name` and waits for its teardown; the name is free after. A
    /// connect of `name` under way is refused when it would be installed
    /// (its server is closed again).
    ///
    /// # Errors
    /// [`ConnectError::Unknown`] if there is no such name.
    ///
    /// # Cancel safety
    /// Cancel safe: the teardown runs in the connection's own task.
    pub async fn disconnect(&self, name: &str) -> Result<Option<Arc<Teardown>>, ConnectError> {
        let slot = lock(&self.inner.slots)
            .remove(name)
            .ok_or_else(|| ConnectError::Unknown(name.into()))?;
        Ok(match slot.state {
            State::Live(connection, ..) => connection.close_for(Ended::Disconnected).await,
            _ => None,
        })
    }

    /// Closes every connection, cancels every connect and reconnect under
    /// way, and waits until every task of the manager ended: every server's
    /// whole tree is gone when it returns. Later connects are refused.
    ///
    /// # Cancel safety
    /// Cancel safe: each teardown runs in its connection's own task.
    pub async fn shutdown(&self) -> Vec<(String, Option<Arc<Teardown>>)> {
        self.inner.shut.store(true, Ordering::SeqCst);
        self.inner.closing.cancel();
        let slots: Vec<(String, Slot)> = lock(&self.inner.slots).drain().collect();
        let mut done = Vec::new();
        for (name, slot) in slots {
            let teardown = match slot.state {
                State::Live(connection, ..) => connection.close_for(Ended::Shutdown).await,
                _ => None,
            };
            done.push((name, teardown));
        }
        // Connects and reconnects under way tear down on the token.
        self.tasks.idle().await;
        done
    }
}

/// Frees a reserved name when a connect fails or is dropped before its
/// connection was installed.
struct Reservation<'a> {
    inner: &'a Arc<Inner>,
    name: &'a str,
    slot: u64,
    armed: bool,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut slots = lock(&self.inner.slots);
            if slots
                .get(self.name)
                .is_some_and(|slot| slot.id == self.slot && !matches!(slot.state, State::Live(..)))
            {
                slots.remove(self.name);
            }
        }
    }
}
