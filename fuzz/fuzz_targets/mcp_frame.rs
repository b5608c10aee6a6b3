//! `corral mcp wrap`'s input side: the line framer (`corral_mcp::frame`) and
//! the envelope validator (`corral_mcp::message::classify`), fed the byte
//! stream a hostile client or server could write, split at arbitrary points.
//!
//! Invariants of the framer (from `frame`'s documentation):
//! - never panics;
//! - the pieces do not depend on how the stream is split into reads, nor on
//!   whether it arrives through `push` or `read_buffer` (as the relay reads);
//! - they are those of the plain model: split at `\n`, drop one `\r` before
//!   it, a line longer than the cap is one `TooLong` whose `len` counts its
//!   bytes without the final `\n`, a last line without `\n` comes at the end;
//! - a `Line` holds no `\n` and is at most the cap.
//!
//! Invariants of the validator (from `message`'s documentation):
//! - never panics, never says `TooLong`;
//! - `NotUtf8 { at }` exactly for invalid UTF-8, `at` the first bad byte;
//! - a line `serde_json` reads as a value is never `NotJson`, and is
//!   `NotObject` exactly when the value is not an object;
//! - an accepted message agrees with the JSON value about `id`, `method`,
//!   `result`/`error` and a cancellation's `params.requestId`; an accepted
//!   line that `serde_json::Value` refuses is refused only for a value the
//!   envelope skips (a lone surrogate escape, a float out of range).

#![no_main]

use corral_mcp::{
    frame::{DEFAULT_MAX_FRAME_BYTES, Framer, Piece},
    message::{Id, Malformed, Message, classify},
};
use libfuzzer_sys::{arbitrary::Unstructured, fuzz_target};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Owned {
    Line(Vec<u8>),
    TooLong(u64),
}

fn own(piece: Piece<'_>) -> Owned {
    match piece {
        Piece::Line(line) => Owned::Line(line.to_vec()),
        Piece::TooLong { len } => Owned::TooLong(len),
    }
}

/// The framer's pieces for `stream` read in chunks of the given sizes (the
/// last size repeats), alternately through `push` and `read_buffer`.
fn frame(max: usize, stream: &[u8], sizes: &[usize]) -> Vec<Owned> {
    let mut framer = Framer::new(max);
    let mut out = Vec::new();
    let mut rest = stream;
    let mut turn = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(turn)
            .or(sizes.last())
            .copied()
            .unwrap_or(rest.len());
        let (chunk, after) = rest.split_at(size.clamp(1, rest.len()));
        if turn % 2 == 0 {
            framer.push(chunk);
        } else {
            framer.read_buffer().extend_from_slice(chunk);
        }
        while let Some(piece) = framer.next_piece() {
            out.push(own(piece));
        }
        rest = after;
        turn += 1;
    }
    if let Some(piece) = framer.finish() {
        out.push(own(piece));
    }
    // Nothing more once finished.
    assert_eq!(framer.next_piece(), None);
    assert_eq!(framer.finish(), None);
    out
}

/// The plain model of the framing.
fn model(max: usize, stream: &[u8]) -> Vec<Owned> {
    let mut out = Vec::new();
    let mut raws: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    // After the last `\n` (or in an empty stream) nothing is pending.
    if raws.last().is_some_and(|last| last.is_empty()) {
        raws.pop();
    }
    for raw in raws {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        out.push(if line.len() <= max {
            Owned::Line(line.to_vec())
        } else {
            Owned::TooLong(raw.len() as u64)
        });
    }
    out
}

fn id_matches(id: &Id, value: &Value) -> bool {
    match (id, value) {
        (Id::String(s), Value::String(v)) => s == v,
        (Id::Number(n), Value::Number(v)) => {
            v.as_i64().map(i128::from) == Some(*n) || v.as_u64().map(i128::from) == Some(*n)
        }
        _ => false,
    }
}

fn as_id(value: &Value) -> Option<Id> {
    match value {
        Value::String(s) => Some(Id::String(s.clone())),
        Value::Number(n) => n
            .as_i64()
            .map(i128::from)
            .or(n.as_u64().map(i128::from))
            .map(Id::Number),
        _ => None,
    }
}

fn check_classify(line: &[u8]) {
    let result = classify(line);
    assert!(!matches!(result, Err(Malformed::TooLong { .. })));
    match std::str::from_utf8(line) {
        Err(e) => {
            assert_eq!(
                result,
                Err(Malformed::NotUtf8 {
                    at: e.valid_up_to()
                })
            );
            return;
        }
        Ok(_) => assert!(
            !matches!(result, Err(Malformed::NotUtf8 { .. })),
            "{result:?}"
        ),
    }
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(value) => value,
        Err(e) => {
            if result.is_ok() {
                let why = e.to_string();
                assert!(
                    why.contains("surrogate") || why.contains("out of range"),
                    "accepted a line serde_json refuses: {why}: {:?}",
                    String::from_utf8_lossy(line)
                );
            }
            return;
        }
    };
    assert!(!matches!(result, Err(Malformed::NotJson(_))), "{result:?}");
    let Value::Object(object) = &value else {
        assert!(matches!(result, Err(Malformed::NotObject(_))), "{result:?}");
        return;
    };
    assert!(
        !matches!(result, Err(Malformed::NotObject(_))),
        "{result:?}"
    );
    let Ok(message) = result else {
        return;
    };
    let method = object.get("method");
    let id = object.get("id");
    match &message {
        Message::Request {
            id: mid,
            method: mm,
        } => {
            assert_eq!(method, Some(&Value::String(mm.clone())));
            assert!(
                id.is_some_and(|v| id_matches(mid, v)),
                "{message:?} vs {value}"
            );
        }
        Message::Notification {
            method: mm,
            cancels,
        } => {
            assert_eq!(method, Some(&Value::String(mm.clone())));
            assert!(id.is_none(), "{message:?} vs {value}");
            let request_id = object
                .get("params")
                .and_then(|p| p.get("requestId"))
                .and_then(as_id);
            if mm == "notifications/cancelled" {
                if let Some(request_id) = request_id {
                    assert_eq!(cancels.as_ref(), Some(&request_id), "{value}");
                }
            } else {
                assert_eq!(cancels, &None, "{value}");
            }
            if cancels.is_some() {
                assert!(
                    object
                        .get("params")
                        .and_then(|p| p.get("requestId"))
                        .is_some()
                );
            }
        }
        Message::Response { id: mid } => {
            assert!(method.is_none(), "{message:?} vs {value}");
            match mid {
                Some(mid) => {
                    assert!(
                        id.is_some_and(|v| id_matches(mid, v)),
                        "{message:?} vs {value}"
                    );
                    assert!(object.contains_key("result") || object.contains_key("error"));
                }
                None => {
                    assert_eq!(id, Some(&Value::Null));
                    assert!(object.contains_key("error"));
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let max = match u.arbitrary::<u8>().unwrap_or(0) {
        0 => DEFAULT_MAX_FRAME_BYTES,
        n => usize::from(n % 96),
    };
    let count = usize::from(u.arbitrary::<u8>().unwrap_or(0) % 8);
    let sizes: Vec<usize> = (0..count)
        .map(|_| usize::from(u.arbitrary::<u8>().unwrap_or(1)))
        .collect();
    let stream = u.take_rest();

    let whole = frame(max, stream, &[]);
    let bytewise = frame(max, stream, &[1]);
    let split = frame(max, stream, &sizes);
    // `Framer::new` raises a cap of 0 to 1.
    let expected = model(max.max(1), stream);
    assert_eq!(whole, expected, "one read (max {max})");
    assert_eq!(bytewise, expected, "byte by byte (max {max})");
    assert_eq!(split, expected, "reads of {sizes:?} (max {max})");

    for piece in &whole {
        if let Owned::Line(line) = piece {
            assert!(!line.contains(&b'\n'));
            assert!(line.len() <= max.max(1));
            check_classify(line);
        }
    }
    // The stream itself as one line, for lines longer than the small caps.
    check_classify(stream);
});
