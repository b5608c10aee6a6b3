//! MCP streamable HTTP on a hand-written HTTP/1.1 server: one thread per
//! connection, `Connection: close` on every answer.

use std::io::{self, BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};

use serde_json::Value;

use crate::garbage;
use crate::mcp::{SAFETY_NET, Server, Sink};

/// The session id sent with the `initialize` answer.
const SESSION: &str = "fixture-session";

/// Binds `addr`, prints `listening http://ADDR/mcp` on stdout, then serves
/// until killed.
pub fn serve(server: &'static Server, addr: &str) -> io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    let mut out = io::stdout().lock();
    writeln!(out, "listening http://{}/mcp", listener.local_addr()?)?;
    out.flush()?;
    drop(out);
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                std::thread::spawn(move || {
                    if let Err(err) = connection(server, stream) {
                        eprintln!("fixture: http connection: {err}");
                    }
                });
            }
            Err(err) => eprintln!("fixture: accept: {err}"),
        }
    }
    Ok(())
}

/// One request: its method, path and body.
struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
    /// The MCP headers and whether `Authorization` came, for the log.
    headers: String,
}

fn read_request(stream: &TcpStream) -> io::Result<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let target = words.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_owned();
    let mut length = 0usize;
    let mut noted = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let name = name.trim().to_ascii_lowercase();
            if matches!(
                name.as_str(),
                "mcp-session-id" | "mcp-protocol-version" | "authorization"
            ) {
                noted.push(format!("{name}={}", value.trim()));
            }
        }
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value
                .trim()
                .parse()
                .map_err(|_| io::Error::other("bad Content-Length"))?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    noted.sort();
    let headers = noted.join(" ");
    Ok(Request {
        method,
        path,
        body,
        headers,
    })
}

fn connection(server: &'static Server, mut stream: TcpStream) -> io::Result<()> {
    let request = read_request(&stream)?;
    server.note(&format!("{} headers: {}", request.method, request.headers));
    match (request.method.as_str(), request.path.as_str()) {
        ("POST", "/mcp") => post(server, stream, &request.body),
        ("DELETE", "/mcp") => {
            server.note("session deleted");
            plain(&mut stream, "200 OK")
        }
        ("GET", "/mcp") => plain(&mut stream, "405 Method Not Allowed"),
        _ => plain(&mut stream, "400 Bad Request"),
    }
}

/// An answer without a body.
fn plain(stream: &mut TcpStream, status: &str) -> io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    stream.flush()
}

fn post(server: &'static Server, mut stream: TcpStream, body: &[u8]) -> io::Result<()> {
    server.log_received(body.strip_suffix(b"\n").unwrap_or(body));
    let Ok(Value::Object(msg)) = serde_json::from_slice::<Value>(body) else {
        return plain(&mut stream, "400 Bad Request");
    };
    let params = msg.get("params").cloned().unwrap_or(Value::Null);
    let (Some(method), Some(id)) = (msg.get("method").and_then(Value::as_str), msg.get("id"))
    else {
        if let Some(method) = msg.get("method").and_then(Value::as_str) {
            server.notification(method, &params);
        }
        return plain(&mut stream, "202 Accepted");
    };
    let session = if method == "initialize" {
        format!("Mcp-Session-Id: {SESSION}\r\n")
    } else {
        String::new()
    };
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         {session}Connection: close\r\n\r\n"
    )?;
    stream.flush()?;
    let mut sink = Sse {
        server,
        stream,
        id: id.clone(),
        sent: 0,
        closed: false,
    };
    let handshake = matches!(method, "initialize" | "server/discover");
    if server.opts.garbage && !handshake {
        sink.garbage();
    }
    server.request(id, method, &params, &mut sink);
    if sink.sent == 0 {
        if server.is_cancelled(id) && !sink.closed() {
            // Its `notifications/cancelled` (a POST of its own) came before
            // the stream closed: the client closes it still, and that is
            // noted too, whichever came first.
            server.note(&format!("cancelled request {id} before its stream closed"));
        }
        // Never answered: keep the stream open until the client gives up.
        let end = std::time::Instant::now() + SAFETY_NET;
        while !sink.closed() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    Ok(())
}

/// The SSE stream answering one request.
struct Sse {
    server: &'static Server,
    stream: TcpStream,
    id: Value,
    sent: usize,
    closed: bool,
}

impl Sse {
    fn write(&mut self, text: &str) {
        if self.closed {
            return;
        }
        if self
            .stream
            .write_all(text.as_bytes())
            .and_then(|()| self.stream.flush())
            .is_err()
        {
            self.gone();
        }
    }

    fn event(&mut self, data: &str) {
        self.write(&format!("event: message\ndata: {data}\n\n"));
    }

    fn garbage(&mut self) {
        self.write(": keepalive\n\n");
        self.event(garbage::SCHEMA_INVALID);
        for line in garbage::lines(self.server.opts.garbage_big) {
            self.event(&line);
        }
    }

    fn gone(&mut self) {
        if !self.closed {
            self.closed = true;
            self.server
                .note(&format!("stream closed for request {}", self.id));
        }
    }

    /// Whether the client closed its end: a read that would block means it
    /// is still open; end of file or an error means it is gone.
    fn peer_closed(&self) -> bool {
        let mut byte = [0u8; 1];
        if self.stream.set_nonblocking(true).is_err() {
            return true;
        }
        let closed = match self.stream.peek(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(err) => !matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
        };
        let _ = self.stream.set_nonblocking(false);
        closed
    }
}

impl Sink for Sse {
    fn send(&mut self, msg: &Value) {
        self.sent += 1;
        self.event(&msg.to_string());
    }

    fn closed(&mut self) -> bool {
        if !self.closed && self.peer_closed() {
            self.gone();
        }
        self.closed
    }
}
