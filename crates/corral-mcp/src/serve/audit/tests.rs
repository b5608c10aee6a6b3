use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicU32, Ordering},
    },
};

use serde_json::{Value, json};

use super::*;

/// A fresh file path under the system's temp directory, removed on drop.
struct ScratchFile(PathBuf);

impl ScratchFile {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "corral-audit-{}-{}.jsonl",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Self(std::env::temp_dir().join(name))
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

#[test]
fn creates_the_file_private() {
    let path = ScratchFile::new();
    let _audit = Audit::open(&path.0).expect("open");
    let mode = fs::metadata(&path.0)
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn appends_one_line_per_record_and_keeps_what_was_there() {
    let path = ScratchFile::new();
    fs::write(&path.0, "{\"before\":true}\n").expect("seed");
    // An audit file must be private (records hold argv).
    fs::set_permissions(&path.0, fs::Permissions::from_mode(0o600)).expect("chmod 600");
    let audit = Audit::open(&path.0).expect("open");
    audit
        .append(&json!({"tool": "run", "text": "two\nlines"}))
        .expect("append");
    drop(audit);
    let audit = Audit::open(&path.0).expect("reopen");
    audit.append(&json!(3)).expect("append");
    let text = fs::read_to_string(&path.0).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "{\"before\":true}",
            "{\"text\":\"two\\nlines\",\"tool\":\"run\"}",
            "3"
        ]
    );
}

/// `size` bytes of padding in an object of strings of at most 2000 bytes.
fn pad(size: usize) -> Value {
    let mut parts = serde_json::Map::new();
    let mut left = size;
    while left > 0 {
        let part = left.min(2000);
        parts.insert(parts.len().to_string(), Value::from("x".repeat(part)));
        left -= part;
    }
    Value::Object(parts)
}

#[test]
fn concurrent_appends_never_interleave() {
    const THREADS: usize = 8;
    const EACH: usize = 200;
    let path = ScratchFile::new();
    let audit = Arc::new(Audit::open(&path.0).expect("open"));
    let workers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let audit = Arc::clone(&audit);
            std::thread::spawn(move || {
                for seq in 0..EACH {
                    // Sizes from a few bytes to past a pipe buffer (64 KiB),
                    // in strings short enough to be kept whole (the audit
                    // cuts longer ones).
                    let size = (seq * 7_919 + thread * 104_729) % 70_000;
                    let record = json!({"thread": thread, "seq": seq, "pad": pad(size)});
                    audit.append(&record).expect("append");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    let text = fs::read_to_string(&path.0).expect("read");
    let mut seen = vec![vec![false; EACH]; THREADS];
    let mut count = 0;
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).expect("every line parses");
        let thread = record["thread"].as_u64().expect("thread") as usize;
        let seq = record["seq"].as_u64().expect("seq") as usize;
        let size = (seq * 7_919 + thread * 104_729) % 70_000;
        let kept: usize = record["pad"]
            .as_object()
            .expect("pad")
            .values()
            .map(|part| part.as_str().expect("a string").len())
            .sum();
        assert_eq!(kept, size, "{thread}/{seq}");
        assert!(!seen[thread][seq], "duplicate {thread}/{seq}");
        seen[thread][seq] = true;
        count += 1;
    }
    assert_eq!(count, THREADS * EACH);
    assert!(text.ends_with('\n'));
}

#[test]
fn open_fails_in_a_missing_directory() {
    let path = std::env::temp_dir().join(format!("corral-audit-missing-{}", std::process::id()));
    let error = Audit::open(&path.join("audit.jsonl")).expect_err("no directory");
    assert_eq!(error.kind(), io::ErrorKind::NotFound);
}
