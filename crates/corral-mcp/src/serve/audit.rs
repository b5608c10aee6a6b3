//! The audit log: one JSON line per record, appended whole.

use std::{
    fs::File,
    io::{self, Write as _},
    path::Path,
    sync::Mutex,
};

use serde_json::Value;

/// The most bytes of one string kept in a record (a command line, a shell
/// script, an argument, a directory); the rest is cut, with a marker.
pub(crate) const MAX_STRING: usize = 4096;
/// The most bytes of items kept in one array of a record (the arguments of
/// a command line); the items beyond are cut, with a marker.
pub(crate) const MAX_STRINGS: usize = 16 * 1024;

/// An append-only JSON-lines file shared by every run of the server.
#[derive(Debug)]
pub(crate) struct Audit {
    file: Mutex<File>,
}

impl Audit {
    /// Opens `path` for appending (`O_APPEND`), creating it with mode 0600,
    /// if only this user or root could have written it and nobody else can
    /// read it (records hold command lines): [`crate::private_file`].
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let file = crate::private_file::open(path, crate::private_file::Access::Append)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Appends `record` as one JSON line in one `write(2)`, under a lock:
    /// concurrent appends never interleave, and a crash never leaves a torn
    /// line behind a complete one. A short write is an error, not retried
    /// in pieces (the rest would land after other lines).
    /// Every string is cut to [`MAX_STRING`] bytes and every array to
    /// about [`MAX_STRINGS`], each cut marked with what it cut: a 4 MB
    /// `shell` script writes a short line.
    pub(crate) fn append(&self, record: &serde_json::Value) -> io::Result<()> {
        let mut record = record.clone();
        cut(&mut record);
        // A `Value` serializes on one line: newlines in strings are escaped.
        let mut line = serde_json::to_vec(&record)?;
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

/// Cuts each string of `value` to [`MAX_STRING`] bytes, and each array to
/// about [`MAX_STRINGS`] bytes of items, marking each cut: "…[cut N
/// bytes]" ends a cut string, "…[cut N more items, M bytes]" replaces the
/// items cut from an array.
fn cut(value: &mut Value) {
    match value {
        Value::String(text) if text.len() > MAX_STRING => {
            let mut end = MAX_STRING;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let cut = text.len() - end;
            text.truncate(end);
            text.push_str(&format!("…[cut {cut} bytes]"));
        }
        Value::Array(items) => {
            let mut kept = 0;
            let mut bytes = 0;
            for item in items.iter_mut() {
                if bytes >= MAX_STRINGS {
                    break;
                }
                cut(item);
                bytes += item.to_string().len();
                kept += 1;
            }
            if kept < items.len() {
                let rest = items.split_off(kept);
                let bytes: usize = rest.iter().map(|item| item.to_string().len()).sum();
                items.push(Value::String(format!(
                    "…[cut {} more items, {bytes} bytes]",
                    rest.len()
                )));
            }
        }
        Value::Object(fields) => fields.values_mut().for_each(cut),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
