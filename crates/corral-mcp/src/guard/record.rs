//! What `on` changed in each entry, so that `off` puts back the very bytes
//! it found: for each guarded entry, the text of its region (from the
//! first to the last byte of `command` and `args`) before and after. Kept
//! in the state directory, one file per config.

use std::{
    collections::BTreeMap,
    io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::file::{flat_name, make_private_dir};

/// One entry's region before and after `on`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    /// The text before.
    pub original: String,
    /// The text `on` wrote.
    pub guarded: String,
}

/// The records of one config file.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Records {
    /// The format's version.
    pub version: u32,
    /// Each entry's region, by `[container keys..., name]` as JSON.
    pub entries: BTreeMap<String, Region>,
}

/// The key of an entry.
pub fn key(container: &[String], name: &str) -> String {
    let mut keys = container.to_vec();
    keys.push(name.to_owned());
    serde_json::to_string(&keys).unwrap_or_default()
}

/// Where the records of the config at `real` are kept.
pub fn path(dir: &Path, real: &Path) -> PathBuf {
    dir.join(format!("{}.json", flat_name(real)))
}

/// Reads the records at `path` (none when missing or unreadable: `off`
/// then rebuilds the entry from the guard's words).
pub fn load(path: &Path) -> Records {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Writes `records` to `path` (removes it when empty), atomically.
///
/// # Errors
/// The directory or file cannot be written.
pub fn store(path: &Path, records: &Records) -> io::Result<()> {
    if records.entries.is_empty() {
        return match std::fs::remove_file(path) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        };
    }
    if let Some(dir) = path.parent() {
        make_private_dir(dir)?;
    }
    let temp = path.with_extension(format!("tmp{}", std::process::id()));
    let text = serde_json::to_vec_pretty(&Records {
        version: 1,
        entries: records.entries.clone(),
    })
    .map_err(io::Error::other)?;
    {
        use std::{io::Write as _, os::unix::fs::OpenOptionsExt as _};
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(&text)?;
        file.sync_all()?;
    }
    std::fs::rename(&temp, path)
}
