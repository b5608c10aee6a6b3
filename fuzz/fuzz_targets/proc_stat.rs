//! `parse_stat`: corral's parser of `/proc/PID/stat` (included from
//! `crates/corral/src/identity/stat.rs`, which is private to the library),
//! whose command name (`comm`) a process chooses itself and may hold
//! spaces, parentheses and newlines.
//!
//! Invariants (from the parser's documentation: the name sits between the
//! first `(` and the *last* `)`):
//! - never panics;
//! - a parsed line's `comm` is exactly the text between the first `(` and the
//!   last `)`;
//! - whatever it parses re-parses to the same fields from a line written the
//!   way the kernel writes it;
//! - a line written the way the kernel writes it, with any command name at
//!   all, parses back to exactly its fields (the hostile-name guarantee).

#![no_main]

use libfuzzer_sys::{arbitrary::Unstructured, fuzz_target};
use stat::{Stat, parse_stat};

// Only the parser is fuzzed; the file's reader (and `is_running`) go unused.
#[allow(dead_code)]
#[path = "../../crates/corral/src/identity/stat.rs"]
mod stat;

/// The line the kernel would write for `stat`, with the fields the parser
/// skips (7 to 19, and 21) from `filler`.
fn kernel_line(stat: &Stat, filler: &[i64; 14]) -> String {
    let mut line = format!(
        "{} ({}) {} {} {} {}",
        stat.pid, stat.comm, stat.state, stat.ppid, stat.pgid, stat.sid
    );
    for value in &filler[..13] {
        line.push_str(&format!(" {value}"));
    }
    // num_threads, itrealvalue, starttime, then fields the parser ignores.
    line.push_str(&format!(
        " {} {} {} 1000 100 18446744073709551615\n",
        stat.threads, filler[13], stat.start_time
    ));
    line
}

fuzz_target!(|data: &[u8]| {
    // 1. Arbitrary text.
    let text = String::from_utf8_lossy(data);
    if let Some(stat) = parse_stat(&text) {
        let open = text.find('(').expect("parsed without '('");
        let close = text.rfind(')').expect("parsed without ')'");
        assert_eq!(
            stat.comm,
            text[open + 1..close],
            "comm is not the text between the parentheses"
        );
        assert!(!stat.state.is_ascii_whitespace());
        let again = parse_stat(&kernel_line(&stat, &[0; 14]));
        assert_eq!(
            again.as_ref(),
            Some(&stat),
            "does not re-parse from the kernel's form"
        );
    }

    // 2. A kernel-style line with a hostile command name.
    let mut u = Unstructured::new(data);
    let (
        Ok(pid),
        Ok(ppid),
        Ok(pgid),
        Ok(sid),
        Ok(threads),
        Ok(start_time),
        Ok(state),
        Ok(filler),
        Ok(comm),
    ) = (
        u.arbitrary::<i32>(),
        u.arbitrary::<i32>(),
        u.arbitrary::<i32>(),
        u.arbitrary::<i32>(),
        u.arbitrary::<i64>(),
        u.arbitrary::<u64>(),
        u.choose(&['R', 'S', 'D', 'Z', 'T', 't', 'W', 'X', 'x', 'K', 'P', 'I']),
        u.arbitrary::<[i64; 14]>(),
        u.arbitrary::<String>(),
    )
    else {
        return;
    };
    // The state is one of the kernel's letters.
    let state = *state;
    let stat = Stat {
        pid,
        comm,
        state,
        ppid,
        pgid,
        sid,
        threads,
        start_time,
    };
    let line = kernel_line(&stat, &filler);
    assert_eq!(
        parse_stat(&line),
        Some(stat),
        "hostile name broke the parse of {line:?}"
    );
});
