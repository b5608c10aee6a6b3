//! Reading and parsing `/proc/PID/stat`, with nothing but `std`: corral's test
//! crate (`crates/corral-tests/src/proc.rs`) and the fuzz target
//! `fuzz/fuzz_targets/proc_stat.rs` include this file by its path, so that
//! what they read is what corral reads, the way corral reads it.

use std::{
    fs,
    io::{self, Read},
};

/// The fields of `/proc/PID/stat` that corral uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Process id.
    pub pid: i32,
    /// The command name (`comm`), at most 15 bytes, may contain anything.
    pub comm: String,
    /// One-letter state: `R`, `S`, `D`, `Z` (zombie), `T`, `X` (dead), ...
    pub state: char,
    /// Parent process id.
    pub ppid: i32,
    /// Process group id.
    pub pgid: i32,
    /// Session id.
    pub sid: i32,
    /// Threads (`num_threads`).
    pub threads: i64,
    /// Start time in clock ticks after boot.
    pub start_time: u64,
}

impl Stat {
    /// Whether the process is still running (not a zombie, not dead). A
    /// zombie has exited and holds nothing but its pid and exit status; but
    /// a process whose first thread has exited while another runs on reads
    /// `Z` too (with more than one thread), and is running.
    pub fn is_running(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x') || (self.state == 'Z' && self.threads > 1)
    }
}

/// Parses the contents of `/proc/PID/stat`.
///
/// The command name sits in parentheses and may itself contain spaces and
/// parentheses, so the fields after it are found from the *last* `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    if close < open {
        return None;
    }
    let pid = text.get(..open)?.trim().parse().ok()?;
    let comm = text.get(open + 1..close)?.to_owned();
    let mut rest = text.get(close + 1..)?.split_ascii_whitespace();
    // Fields from 3 on: state ppid pgrp session tty_nr tpgid flags minflt
    // cminflt majflt cmajflt utime stime cutime cstime priority nice
    // num_threads itrealvalue starttime.
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgid = rest.next()?.parse().ok()?;
    let sid = rest.next()?.parse().ok()?;
    let threads = rest.nth(13)?.parse().ok()?;
    let start_time = rest.nth(1)?.parse().ok()?;
    Some(Stat {
        pid,
        comm,
        state,
        ppid,
        pgid,
        sid,
        threads,
        start_time,
    })
}

/// A `/proc` file of a few kilobytes as text (`mountinfo`, a `cgroup` file,
/// the boot id): into a 4 KB buffer first, so usually one `read` and the
/// end-of-file one, where reading to a string without a size (`/proc`
/// gives none) probes with 32 bytes and doubles (eight reads for a 1.5 KB
/// `mountinfo`).
///
/// # Errors
/// If the file cannot be opened or read, or is not UTF-8.
pub fn read_small_text(path: &str) -> io::Result<String> {
    // Read to end-of-file: a line-by-line `/proc` file (`mountinfo`) comes
    // in reads of whole lines, so a short read is not its end.
    let mut text = String::with_capacity(4096);
    fs::File::open(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// A small `/proc` file in one `read` where it fits (a `stat` line does):
/// open, read, close, without the size query and the second read for
/// end-of-file that reading to a string costs. A walk of the host reads one
/// per process, so this is most of what a walk costs.
pub fn read_small(path: &str) -> io::Result<Vec<u8>> {
    let mut file = fs::File::open(path)?;
    let mut bytes = vec![0; 512];
    let mut filled = 0;
    loop {
        match file.read(&mut bytes[filled..]) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                // A procfs file is generated whole at the first read: a
                // short read is all of it.
                if filled < bytes.len() {
                    break;
                }
                bytes.resize(bytes.len() * 2, 0);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    bytes.truncate(filled);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 1000 100 18446744073709551615";

    /// A file of more than one buffer is read whole, and a `/proc` file
    /// reads as reading it to a string does.
    #[test]
    fn small_text_is_read_whole() {
        let path = std::env::temp_dir().join(format!("corral-small-text-{}", std::process::id()));
        let text: String = (0..2000).map(|n| format!("line {n}\n")).collect();
        fs::write(&path, &text).expect("write");
        let read = read_small_text(path.to_str().expect("utf-8"));
        let _ = fs::remove_file(&path);
        assert_eq!(read.expect("read"), text);
        // A line-by-line `/proc` file far over one page (each read returns
        // whole lines only): read to its end, not to its first short read.
        let symbols = read_small_text("/proc/kallsyms").expect("kallsyms");
        assert!(symbols.len() > 64 << 10, "{} bytes", symbols.len());
        assert_eq!(
            symbols,
            fs::read_to_string("/proc/kallsyms").expect("kallsyms")
        );
    }

    #[test]
    fn parses_hostile_command_names() {
        let stat = parse_stat(SAMPLE).expect("parses");
        assert_eq!(stat.pid, 1234);
        assert_eq!(stat.comm, "a) b (c)");
        assert_eq!(stat.state, 'S');
        assert_eq!((stat.ppid, stat.pgid, stat.sid), (1, 1234, 1234));
        assert_eq!(stat.start_time, 98765);
    }

    #[test]
    fn rejects_truncated_and_garbage() {
        for text in [
            "",
            "1234",
            "1234 (x",
            "x) (y",
            "12 (x) S 1 2 3",
            ") 1 (",
            "abc (x) S 1 1 1 0",
        ] {
            assert_eq!(parse_stat(text), None, "{text:?}");
        }
        // Every prefix of a valid line is handled without a panic.
        for end in 0..SAMPLE.len() {
            let _ = parse_stat(&SAMPLE[..end]);
        }
    }

    #[test]
    fn zombie_is_not_running() {
        let mut stat = parse_stat(SAMPLE).expect("parses");
        stat.state = 'Z';
        assert!(!stat.is_running());
        // The first thread of a process has exited, another runs on.
        stat.threads = 2;
        assert!(stat.is_running());
    }
}
