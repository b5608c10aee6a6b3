use std::{
    io::Read,
    os::{fd::AsRawFd, unix::fs::MetadataExt},
};

use super::*;

/// A scratch directory of this test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("corral-cli-sink-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn report() -> serde_json::Value {
    serde_json::json!({"version": 1, "notes": vec!["a"; 1000]})
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_report_file_is_replaced_by_a_rename_never_written_in_place() {
    let scratch = Scratch::new("atomic");
    let path = scratch.0.join("report.json");
    let sink = Sink::open(Some(&path), None)
        .expect("open")
        .expect("a sink");
    // Created (empty) at once, so a bad path fails before the command runs.
    let opened = std::fs::metadata(&path).expect("created at open");
    assert_eq!(opened.len(), 0);
    // A reader that opened the file before the report was written keeps the
    // empty file: it never sees a partial report.
    let mut early = File::open(&path).expect("early reader");
    sink.write(&report()).expect("write");
    let written = std::fs::metadata(&path).expect("written");
    assert_ne!(written.ino(), opened.ino(), "not replaced by a rename");
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.ends_with("}\n"), "{text}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON"),
        report()
    );
    let mut seen = String::new();
    early.read_to_string(&mut seen).expect("early read");
    assert!(seen.is_empty(), "{seen}");
    // No temporary file is left beside it.
    assert_eq!(entries(&scratch.0), ["report.json"]);
}

#[test]
fn a_stale_temporary_file_is_left_alone_and_the_report_still_written() {
    let scratch = Scratch::new("stale");
    let path = scratch.0.join("report.json");
    let stale = scratch
        .0
        .join(format!("report.json.tmp-{}", std::process::id()));
    std::fs::write(&stale, "not ours").expect("stale file");
    let sink = Sink::open(Some(&path), None)
        .expect("open")
        .expect("a sink");
    sink.write(&report()).expect("write in place");
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON"),
        report()
    );
    assert_eq!(std::fs::read_to_string(&stale).expect("stale"), "not ours");
}

#[test]
fn a_descriptor_receives_the_report_in_place() {
    let scratch = Scratch::new("fd");
    let path = scratch.0.join("fd.json");
    let file = File::create(&path).expect("file behind the descriptor");
    let fd = u32::try_from(file.as_raw_fd()).expect("fd");
    let sink = Sink::open(None, Some(fd)).expect("open").expect("a sink");
    let inode = std::fs::metadata(&path).expect("metadata").ino();
    sink.write(&report()).expect("write");
    let text = std::fs::read_to_string(&path).expect("read");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON"),
        report()
    );
    assert_eq!(std::fs::metadata(&path).expect("metadata").ino(), inode);
    drop(file);
}

#[test]
fn a_path_that_is_not_a_regular_file_is_written_in_place() {
    let sink = Sink::open(Some(Path::new("/dev/null")), None)
        .expect("open")
        .expect("a sink");
    assert!(sink.replace.is_none());
    sink.write(&report()).expect("write");
    assert!(Path::new("/dev/null").exists());
}

#[test]
fn bad_destinations_are_refused_at_open_naming_the_option() {
    let error = Sink::open(Some(Path::new("/nonexistent/dir/r.json")), None)
        .expect_err("no such directory");
    assert!(format!("{error:#}").contains("(--report)"), "{error:#}");
    let error = Sink::open(None, Some(987_654)).expect_err("not open");
    assert!(format!("{error:#}").contains("(--report-fd)"), "{error:#}");
    assert!(Sink::open(None, None).expect("nothing asked").is_none());
}
