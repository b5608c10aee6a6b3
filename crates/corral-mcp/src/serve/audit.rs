//! The audit log: one JSON line per record, appended whole.

use std::{
    fs::{File, OpenOptions},
    io::{self, Write as _},
    os::unix::fs::OpenOptionsExt as _,
    path::Path,
    sync::Mutex,
};

/// An append-only JSON-lines file shared by every run of the server.
#[derive(Debug)]
pub(crate) struct Audit {
    file: Mutex<File>,
}

impl Audit {
    /// Opens `path` for appending (`O_APPEND`), creating it with mode 0600.
    /// An existing file keeps its mode.
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Appends `record` as one JSON line in one `write(2)`, under a lock:
    /// concurrent appends never interleave, and a crash never leaves a torn
    /// line behind a complete one. A short write is an error, not retried
    /// in pieces (the rest would land after other lines).
    pub(crate) fn append(&self, record: &serde_json::Value) -> io::Result<()> {
        // A `Value` serializes on one line: newlines in strings are escaped.
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        // A poisoned lock guards nothing broken: each append is one write.
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            match file.write(&line) {
                Ok(written) if written == line.len() => return Ok(()),
                Ok(written) => {
                    return Err(io::Error::new(
                        io::ErrorKind::WriteZero,
                        format!(
                            "audit log: wrote {written} of {} bytes of a record (disk full?)",
                            line.len()
                        ),
                    ));
                }
                // Nothing was written: the whole line may go again.
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
}

#[cfg(test)]
mod tests;
