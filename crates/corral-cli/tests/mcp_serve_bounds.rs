//! `corral mcp serve --http` against clients that hold what they take: a
//! flood of sockets without the token (idle, slow-loris, refused requests)
//! while a client with the token keeps working, and clients that never
//! read their large answers while the server's memory is watched. The real
//! `corral` binary is the server; the hostile peers are real sockets.

mod mcp_common;

use std::{
    io::{ErrorKind, Read, Write},
    net::{SocketAddr, TcpStream},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use mcp_common::HttpServer;
use serde_json::json;

/// How long the server may take to start.
const LIMIT: Duration = Duration::from_secs(60);

/// What these tests ask of a [`HttpServer`].
trait Bounds {
    fn call(&self, argv: &[&str], token: &str) -> Vec<u8>;
    fn tool(&self, name: &str, arguments: &serde_json::Value, token: &str) -> Vec<u8>;
    fn sockets(&self) -> usize;
    fn status_kb(&self, name: &str) -> u64;
}

impl Bounds for HttpServer {
    /// A stateless (`2026-07-28`) `tools/call run` request for `argv`.
    fn call(&self, argv: &[&str], token: &str) -> Vec<u8> {
        self.tool("run", &json!({"argv": argv}), token)
    }

    /// A stateless (`2026-07-28`) `tools/call` request of tool `name`.
    fn tool(&self, name: &str, arguments: &serde_json::Value, token: &str) -> Vec<u8> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\n\
             Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
            self.address(),
            body.len()
        )
        .into_bytes()
    }

    /// The sockets the server holds open (its listener and its own
    /// included).
    fn sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .expect("the server's descriptors")
            .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().starts_with("socket:"))
            .count()
    }

    /// `name` from the server's `/proc/PID/status`, in kB.
    fn status_kb(&self, name: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server's status");
        status
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {status}"))
    }
}

/// Raises this process's descriptor limit to its hard limit (the flood
/// holds more sockets than the usual soft limit of 1024).
fn raise_nofile() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write `limit`.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit), 0);
        limit.rlim_cur = limit.rlim_max;
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &raw const limit), 0);
    }
    limit.rlim_cur
}

/// Sockets that connect and send nothing, `per_thread` on each of
/// `threads` threads, each reopened as soon as the server closes it;
/// `tried` counts the connects tried.
fn idle_flood(
    address: SocketAddr,
    threads: usize,
    per_thread: usize,
    stop: &Arc<AtomicBool>,
    tried: &Arc<AtomicUsize>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|_| {
            let stop = Arc::clone(stop);
            let tried = Arc::clone(tried);
            std::thread::spawn(move || {
                let mut sockets: Vec<Option<TcpStream>> = (0..per_thread).map(|_| None).collect();
                let mut byte = [0u8; 64];
                while !stop.load(Ordering::Relaxed) {
                    for socket in &mut sockets {
                        let closed = match socket {
                            None => true,
                            Some(stream) => match stream.read(&mut byte) {
                                Ok(0) => true,
                                Ok(_) => false,
                                Err(error) => error.kind() != ErrorKind::WouldBlock,
                            },
                        };
                        if closed {
                            *socket =
                                TcpStream::connect_timeout(&address, Duration::from_millis(200))
                                    .ok()
                                    .inspect(|stream| {
                                        stream.set_nonblocking(true).expect("nonblocking");
                                    });
                            tried.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        })
        .collect()
}

/// Sockets that send a request's headers one byte a second, reopened
/// when closed.
fn slow_loris(
    address: SocketAddr,
    sockets: usize,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let head = format!("POST /mcp HTTP/1.1\r\nHost: {address}\r\nX-Slow: ");
        let mut sockets: Vec<Option<(TcpStream, usize)>> = (0..sockets).map(|_| None).collect();
        while !stop.load(Ordering::Relaxed) {
            for socket in &mut sockets {
                let alive = match socket {
                    None => false,
                    Some((stream, sent)) => {
                        let byte = head.as_bytes().get(*sent).copied().unwrap_or(b'a');
                        *sent += 1;
                        stream.write_all(&[byte]).is_ok()
                    }
                };
                if !alive {
                    *socket = TcpStream::connect_timeout(&address, Duration::from_secs(1))
                        .ok()
                        .map(|stream| (stream, 0));
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

/// Requests with a wrong token, one after another.
fn refused_requests(
    server: &HttpServer,
    stop: &Arc<AtomicBool>,
    refused: &Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    let request = server.call(&["true"], "not-the-token");
    let address = server.address();
    let stop = Arc::clone(stop);
    let refused = Arc::clone(refused);
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(1))
            else {
                continue;
            };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
            let mut answer = Vec::new();
            if stream.write_all(&request).is_ok()
                && stream.read_to_end(&mut answer).is_ok()
                && answer.starts_with(b"HTTP/1.1 401")
            {
                refused.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
}

/// One request on a fresh connection; the whole answer, or why not,
/// within `bound`.
fn ask(server: &HttpServer, request: &[u8], bound: Duration) -> Result<String, String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&server.address(), bound)
        .map_err(|error| format!("connect: {error}"))?;
    let left = bound
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    stream
        .set_read_timeout(Some(left))
        .map_err(|error| error.to_string())?;
    stream
        .write_all(request)
        .map_err(|error| format!("write: {error}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .map_err(|error| format!("read after {:?}: {error}", started.elapsed()))?;
    if started.elapsed() > bound {
        return Err(format!("answered after {:?}", started.elapsed()));
    }
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

#[test]
fn a_flood_without_the_token_locks_no_client_out() {
    let nofile = raise_nofile();
    assert!(
        nofile >= 4096,
        "the flood needs 4096 descriptors; the hard limit is {nofile}"
    );
    let server = HttpServer::start(&[]);
    let stop = Arc::new(AtomicBool::new(false));
    let tried = Arc::new(AtomicUsize::new(0));
    let refused = Arc::new(AtomicUsize::new(0));
    let mut flood = idle_flood(server.address(), 30, 50, &stop, &tried);
    flood.push(slow_loris(server.address(), 100, &stop));
    flood.push(refused_requests(&server, &stop, &refused));

    // The flood is in place: each of the 1,500 idle sockets was opened, or
    // tried when the listener's queue was full.
    let started = Instant::now();
    while tried.load(Ordering::Relaxed) < 1500 {
        assert!(
            started.elapsed() < LIMIT,
            "the flood tried only {} connects",
            tried.load(Ordering::Relaxed)
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // A client with the token: each of 40 calls answered. Locked out, a
    // call is never answered (its connection waits in the listen queue, or
    // is closed as the oldest): 10 s tells that apart from a slow answer
    // on a shared machine, where a latency bound would measure the load.
    let call = server.call(&["echo", "through"], &server.token);
    let mut failures = Vec::new();
    let mut calls = 0;
    while calls < 40 && failures.len() < 3 {
        calls += 1;
        match ask(&server, &call, Duration::from_secs(10)) {
            Ok(answer) if answer.starts_with("HTTP/1.1 200") && answer.contains("through") => {}
            Ok(answer) => failures.push(format!(
                "call {calls}: {}",
                &answer[..answer.len().min(200)]
            )),
            Err(why) => failures.push(format!("call {calls}: {why}")),
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    for thread in flood {
        thread.join().expect("a flood thread");
    }
    assert!(
        failures.is_empty(),
        "{} of {calls} calls with the token failed under the flood ({} connects tried, \
         {} refused requests): {failures:#?}",
        failures.len(),
        tried.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed)
    );
    assert!(
        refused.load(Ordering::Relaxed) > 0,
        "requests without the token were answered 401 meanwhile"
    );
}

/// Waits until `wanted` of `streams` are readable: the server sent the first
/// bytes of its answer, or closed the connection (the answer dropped). The
/// runs behind them queue for the server's concurrency limit, and on a busy
/// machine 100 of them take minutes: what is bounded is the wait for each
/// next one, so a server that stops answering is caught, a slow one is not.
fn answered(streams: &[TcpStream], wanted: usize) {
    let mut waiting: Vec<libc::pollfd> = streams
        .iter()
        .map(|stream| libc::pollfd {
            fd: std::os::fd::AsRawFd::as_raw_fd(stream),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let limit = i32::try_from(LIMIT.as_millis()).expect("LIMIT in ms");
    while streams.len() - waiting.len() < wanted {
        let count = libc::nfds_t::try_from(waiting.len()).expect("a count of descriptors");
        // SAFETY: `waiting` is a live array of `count` pollfds.
        let ready = unsafe { libc::poll(waiting.as_mut_ptr(), count, limit) };
        assert!(
            ready > 0,
            "no answer in {LIMIT:?} after {} of {}: {}",
            streams.len() - waiting.len(),
            streams.len(),
            std::io::Error::last_os_error()
        );
        waiting.retain(|fd| fd.revents == 0);
    }
}

#[test]
fn answers_nobody_reads_keep_the_servers_memory_bounded() {
    raise_nofile();
    let server = HttpServer::start(&[]);
    let before = server.status_kb("VmRSS");
    let sockets = server.sockets();
    // 1 MiB of NUL bytes: about 12 MB of answer once JSON escapes them
    // (the text and the structured result each carry the output).
    let call = server.call(&["head", "-c", "1048576", "/dev/zero"], &server.token);
    let mut unread = Vec::new();
    for _ in 0..100 {
        // The client reads nothing: only the socket buffers take a little.
        let mut stream = TcpStream::connect(server.address()).expect("connect");
        stream.write_all(&call).expect("write");
        unread.push(stream);
    }
    // Ten answers went out: more than the 64 MiB budget holds, so the
    // server holds unwritten answers (and has dropped some) while the other
    // runs go on.
    answered(&unread, 10);
    // A client that reads gets its answer meanwhile. `list_runs` waits for
    // no run slot: a `run` would queue behind the 90 runs still waiting for
    // the concurrency limit, which every client shares (docs/security.md),
    // and be answered only after them.
    let answer = ask(
        &server,
        &server.tool("list_runs", &json!({}), &server.token),
        LIMIT,
    )
    .expect("an answer while 100 clients read nothing");
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("no background runs"),
        "{answer}"
    );
    // Every run ended and its answer went out (or was dropped).
    answered(&unread, unread.len());
    // The peak while the server builds, holds and drops the answers, until
    // it has closed every unread connection (a dropped answer closes it at
    // once, a held one after the write-stall deadline).
    let bound_kb = before + 300 * 1024;
    let started = Instant::now();
    loop {
        let peak = server.status_kb("VmHWM");
        assert!(
            peak < bound_kb,
            "unread answers of 12 MB grew the server from {before} kB to {peak} kB"
        );
        // The server holds the sockets it started with (a closed
        // connection's FIN waits behind the answer its client never read:
        // the client cannot tell).
        let open = server.sockets().saturating_sub(sockets);
        if open == 0 {
            break;
        }
        assert!(
            started.elapsed() < LIMIT,
            "{open} unread connections still open after {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_connection_whose_first_request_never_arrives_is_closed_within_5_s() {
    let server = HttpServer::start(&[]);
    // A slow-loris: a byte of headers every 200 ms, never the end of them.
    let mut stream = TcpStream::connect(server.address()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let closed_after = loop {
        let sent = stream.write_all(b"P").is_ok();
        match stream.read(&mut byte) {
            Ok(0) => break started.elapsed(),
            Err(error) if error.kind() == ErrorKind::WouldBlock && sent => {}
            Err(error) if error.kind() != ErrorKind::WouldBlock => break started.elapsed(),
            other => panic!("the server answered a request never sent: {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "still open after 20 s"
        );
    };
    assert!(
        closed_after >= Duration::from_secs(4) && closed_after < Duration::from_secs(10),
        "closed after {closed_after:?}: the first request has 5 s"
    );
}
