//! The relay's own standard input and output, as async streams.
//!
//! MCP clients connect stdio servers through pipes (Python, Rust) or Unix
//! socket pairs (Node's libuv). Both are used non-blocking, registered with
//! tokio. Anything else (a terminal, a file) goes through tokio's blocking
//! `stdin()` / `stdout()`: setting `O_NONBLOCK` there would change the
//! stream for every process sharing it. So does a standard output that is
//! the same file as standard error (`2>&1`), which the server inherits.
//!
//! # Caveat
//! A blocking read of a terminal cannot be cancelled: a runtime that must
//! not wait for it should end with `Runtime::shutdown_background`.

use std::{
    fs::File,
    io,
    os::{
        fd::{AsFd, OwnedFd},
        unix::fs::{FileTypeExt, MetadataExt},
    },
};

use tokio::io::{AsyncRead, AsyncWrite};

use super::error::WrapError;

/// The client's side: what it writes to us.
pub type ClientInput = Box<dyn AsyncRead + Send + Unpin>;
/// The client's side: what we write to it.
pub type ClientOutput = Box<dyn AsyncWrite + Send + Unpin>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn describe(fd: impl AsFd) -> io::Result<(OwnedFd, Kind, (u64, u64))> {
    let file = File::from(fd.as_fd().try_clone_to_owned()?);
    let meta = file.metadata()?;
    let kind = if meta.file_type().is_fifo() {
        Kind::Pipe
    } else if meta.file_type().is_socket() {
        Kind::Socket
    } else {
        Kind::Other
    };
    Ok((OwnedFd::from(file), kind, (meta.dev(), meta.ino())))
}

/// Opens standard input and output.
///
/// # Errors
/// [`WrapError::Setup`] if a stream cannot be registered with the runtime.
pub fn open() -> Result<(ClientInput, ClientOutput), WrapError> {
    let setup = |what| move |source| WrapError::Setup { what, source };
    let input: ClientInput = match describe(io::stdin()) {
        Ok((fd, Kind::Pipe, _)) => Box::new(
            tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
                .map_err(setup("registering standard input"))?,
        ),
        Ok((fd, Kind::Socket, _)) => {
            Box::new(socket(fd).map_err(setup("registering standard input"))?)
        }
        _ => Box::new(tokio::io::stdin()),
    };
    let stderr_id = describe(io::stderr()).ok().map(|(_, _, id)| id);
    let output: ClientOutput = match describe(io::stdout()) {
        Ok((_, _, id)) if Some(id) == stderr_id => Box::new(tokio::io::stdout()),
        Ok((fd, Kind::Pipe, _)) => Box::new(
            tokio::net::unix::pipe::Sender::from_owned_fd(fd)
                .map_err(setup("registering standard output"))?,
        ),
        Ok((fd, Kind::Socket, _)) => {
            Box::new(socket(fd).map_err(setup("registering standard output"))?)
        }
        _ => Box::new(tokio::io::stdout()),
    };
    Ok((input, output))
}

fn socket(fd: OwnedFd) -> io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}
