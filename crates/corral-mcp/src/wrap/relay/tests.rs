use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

use super::*;

/// A `Shared` whose notes are collected.
fn shared(max: usize) -> (Arc<Shared>, Arc<Mutex<Vec<String>>>) {
    let notes = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&notes);
    let shared = Shared::new(
        max,
        Box::new(move |line| {
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(line.to_owned())
        }),
    );
    (Arc::new(shared), notes)
}

/// Runs one pump from `from` over `input` (written in `chunk`-byte pieces)
/// and returns what came out and how it ended.
async fn run_pump(from: Side, shared: &Shared, input: &[u8], chunk: usize) -> (Vec<u8>, PumpEnd) {
    let (mut feed, mut reader) = duplex(1 << 16);
    let (mut writer, mut drain) = duplex(1 << 16);
    let input = input.to_vec();
    let feeder = tokio::spawn(async move {
        for part in input.chunks(chunk) {
            if feed.write_all(part).await.is_err() {
                break;
            }
        }
    });
    let collector = tokio::spawn(async move {
        let mut out = Vec::new();
        let _ = drain.read_to_end(&mut out).await;
        out
    });
    let end = pump(from, &mut reader, &mut writer, shared, OnWriteError::Stop).await;
    drop(writer);
    let _ = feeder.await;
    (collector.await.unwrap_or_default(), end)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[tokio::test]
async fn forwards_valid_frames_byte_for_byte_in_order_whatever_the_chunking() {
    let input = format!("{DISCOVER}\n{INIT}\r\n{INITIALIZED}\n");
    for chunk in [1, 5, 64, input.len()] {
        let (shared, notes) = shared(1 << 20);
        let (out, end) = run_pump(Side::Client, &shared, input.as_bytes(), chunk).await;
        assert!(matches!(end, PumpEnd::Eof));
        assert_eq!(
            String::from_utf8_lossy(&out),
            format!("{DISCOVER}\n{INIT}\n{INITIALIZED}\n")
        );
        let stats = shared.stats();
        assert_eq!(stats.client_to_server.frames, 3);
        assert_eq!(stats.client_to_server.bytes, out.len() as u64);
        assert_eq!(shared.in_flight(Side::Client), 2);
        assert!(
            notes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
        );
    }
}

#[tokio::test]
async fn malformed_frames_are_dropped_with_one_note_each_and_relaying_goes_on() {
    let garbage: &[&[u8]] = &[
        b"Server listening on stdio...",
        b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
        b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}",
        b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
        b"{\"method\":\"\xff\xfe\"}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}",
    ];
    let mut input = Vec::new();
    for line in garbage {
        input.extend_from_slice(line);
        input.push(b'\n');
        input.extend_from_slice(INITIALIZED.as_bytes());
        input.push(b'\n');
    }
    input.extend_from_slice(b"\n   \n");
    let (shared, notes) = shared(1 << 20);
    let (out, _) = run_pump(Side::Server, &shared, &input, 7).await;
    let expected = format!("{INITIALIZED}\n").repeat(garbage.len());
    assert_eq!(String::from_utf8_lossy(&out), expected);
    let notes = notes.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(notes.len(), garbage.len(), "{notes:#?}");
    for note in &notes {
        assert!(
            note.starts_with("corral mcp: dropped a frame from the server: "),
            "{note}"
        );
        assert!(!note.contains('\n'));
    }
    assert!(
        notes[0].contains("Server listening on stdio"),
        "{}",
        notes[0]
    );
    assert!(notes[1].contains("an array"), "{}", notes[1]);
    let stats = shared.stats();
    assert_eq!(stats.server_to_client.dropped, garbage.len() as u64);
    assert_eq!(stats.server_to_client.frames, garbage.len() as u64);
}

#[tokio::test]
async fn an_over_long_frame_is_dropped_and_the_next_one_passes() {
    let (shared, notes) = shared(1024);
    let mut input = vec![b'{'; 5000];
    input.push(b'\n');
    input.extend_from_slice(INITIALIZED.as_bytes());
    input.push(b'\n');
    let (out, _) = run_pump(Side::Client, &shared, &input, 100).await;
    assert_eq!(String::from_utf8_lossy(&out), format!("{INITIALIZED}\n"));
    let notes = notes.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].contains("5000 bytes, over the cap of 1024"),
        "{}",
        notes[0]
    );
}

#[tokio::test]
async fn a_last_frame_without_newline_is_forwarded_with_one() {
    let (shared, _) = shared(1024);
    let (out, _) = run_pump(Side::Client, &shared, INITIALIZED.as_bytes(), 10).await;
    assert_eq!(String::from_utf8_lossy(&out), format!("{INITIALIZED}\n"));
}

#[tokio::test]
async fn responses_clear_requests_and_cancellations_withdraw_them() {
    let (shared, _) = shared(1024);
    let requests = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep"}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":"three","method":"tools/call"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
        "\n",
    );
    run_pump(Side::Client, &shared, requests.as_bytes(), 1000).await;
    assert_eq!(shared.in_flight(Side::Client), 2);
    let responses = concat!(
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"result":{}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":9,"method":"roots/list"}"#,
        "\n",
    );
    let (out, _) = run_pump(Side::Server, &shared, responses.as_bytes(), 1000).await;
    // The late answer to the cancelled request is forwarded all the same.
    assert_eq!(out, responses.as_bytes());
    assert_eq!(shared.in_flight(Side::Client), 1);
    assert_eq!(shared.in_flight(Side::Server), 1);
    let stats = shared.stats();
    assert_eq!(stats.cancelled, 1);
    // The client's response to 9 came before the server's request 9, and the
    // server's late answer to 2 followed its cancellation.
    assert_eq!(stats.unmatched_responses, 2);
}

#[tokio::test]
async fn requests_in_flight_are_answered_with_errors_oldest_first() {
    let (shared, _) = shared(1024);
    let requests = concat!(
        r#"{"jsonrpc":"2.0","id":"b","method":"tools/call"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":3,"method":"resources/read"}"#,
        "\n",
    );
    run_pump(Side::Client, &shared, requests.as_bytes(), 1000).await;
    run_pump(
        Side::Server,
        &shared,
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n",
        1000,
    )
    .await;
    let (mut writer, mut reader) = duplex(1 << 16);
    shared
        .answer_in_flight(
            &mut writer,
            "MCP server exited with status 1 before answering",
        )
        .await;
    drop(writer);
    let mut out = String::new();
    reader.read_to_string(&mut out).await.unwrap_or_default();
    let answers: Vec<serde_json::Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_default())
        .collect();
    assert_eq!(answers.len(), 2, "{out}");
    assert_eq!(answers[0]["id"], "b");
    assert_eq!(answers[1]["id"], 7);
    for answer in &answers {
        assert_eq!(answer["jsonrpc"], "2.0");
        assert_eq!(answer["error"]["code"], SERVER_GONE_CODE);
        assert_eq!(
            answer["error"]["message"],
            "MCP server exited with status 1 before answering"
        );
        assert!(
            message::classify(serde_json::to_string(answer).unwrap_or_default().as_bytes()).is_ok()
        );
    }
    let stats = shared.stats();
    assert_eq!(
        (stats.in_flight_answered, stats.in_flight_unanswered),
        (2, 0)
    );
    assert_eq!(shared.in_flight(Side::Client), 0);
}

#[tokio::test]
async fn a_broken_client_output_is_discarded_and_the_server_still_drained() {
    let (shared, _) = shared(1024);
    let (mut feed, mut reader) = duplex(64);
    let (mut writer, drain) = duplex(64);
    drop(drain);
    let feeder = tokio::spawn(async move {
        for _ in 0..1000 {
            if feed
                .write_all(format!("{INITIALIZED}\n").as_bytes())
                .await
                .is_err()
            {
                return false;
            }
        }
        true
    });
    let end = pump(
        Side::Server,
        &mut reader,
        &mut writer,
        &shared,
        OnWriteError::Discard,
    )
    .await;
    assert!(matches!(end, PumpEnd::Eof));
    assert!(
        feeder.await.unwrap_or(false),
        "the server side was not drained"
    );
    assert!(!shared.client_writable());
    // The broken output was signalled.
    tokio::time::timeout(
        std::time::Duration::from_secs(1),
        shared.client_broken.notified(),
    )
    .await
    .unwrap_or_else(|_| panic!("client_broken was not signalled"));
    // Nothing is answered on a broken output.
    shared
        .lock()
        .inflight
        .request(Side::Client, Id::Number(1), "x");
    let mut sink = tokio::io::sink();
    shared.answer_in_flight(&mut sink, "gone").await;
    assert_eq!(shared.stats().in_flight_unanswered, 1);
}

#[tokio::test]
async fn a_failed_write_to_the_server_stops_the_client_pump() {
    let (shared, _) = shared(1024);
    let (mut feed, mut reader) = duplex(1024);
    let (mut writer, drain) = duplex(64);
    drop(drain);
    feed.write_all(format!("{INIT}\n").as_bytes())
        .await
        .unwrap_or_default();
    let end = pump(
        Side::Client,
        &mut reader,
        &mut writer,
        &shared,
        OnWriteError::Stop,
    )
    .await;
    assert!(matches!(end, PumpEnd::WriteFailed));
    // The request that could not be written stays in flight, to be answered.
    assert_eq!(shared.in_flight(Side::Client), 1);
}

#[test]
fn error_responses_are_one_valid_line() {
    let line = error_response(&Id::String("x\ny".into()), "killed by signal 9 (SIGKILL)");
    assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
    assert!(line.ends_with(b"\n"));
    assert_eq!(
        message::classify(&line[..line.len() - 1]),
        Ok(Message::Response {
            id: Some(Id::String("x\ny".into()))
        })
    );
}

#[test]
fn the_error_response_wire_format_is_pinned() {
    let line = error_response(
        &Id::Number(7),
        "MCP server exited with status 1 before answering",
    );
    assert_eq!(
        String::from_utf8_lossy(&line),
        concat!(
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32000,"#,
            r#""message":"MCP server exited with status 1 before answering","#,
            r#""data":{"source":"corral mcp wrap"}}}"#,
            "\n"
        )
    );
}

/// A server that logs to standard output at full speed: every line is
/// dropped and counted, but standard error gets a bounded number of notes.
#[tokio::test]
async fn a_flood_of_malformed_frames_gives_a_bounded_number_of_notes() {
    let input = "Server log line, not JSON\n".repeat(5000);
    let (shared, notes) = shared(1 << 20);
    let (out, _) = run_pump(Side::Server, &shared, input.as_bytes(), 4096).await;
    assert!(out.is_empty());
    assert_eq!(shared.stats().server_to_client.dropped, 5000);
    let notes = notes.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(
        notes.len() <= 2 * crate::wrap::notelimit::NOTES_PER_SECOND as usize + 2,
        "{} notes",
        notes.len()
    );
}

/// A client that sends requests and never gets them answered cannot grow
/// the in-flight table past its cap; the newest requests stay tracked.
#[tokio::test]
async fn the_in_flight_table_is_capped() {
    let flood = crate::wrap::inflight::MAX_IN_FLIGHT + 500;
    let mut input = String::new();
    for id in 0..flood {
        input.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\"}}\n"
        ));
    }
    let (shared, notes) = shared(1 << 20);
    let (out, _) = run_pump(Side::Client, &shared, input.as_bytes(), 1 << 16).await;
    assert_eq!(out.len(), input.len(), "every request is forwarded");
    assert_eq!(
        shared.in_flight(Side::Client),
        crate::wrap::inflight::MAX_IN_FLIGHT
    );
    let notes = notes.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert!(
        !notes.is_empty()
            && notes.len() <= 2 * crate::wrap::notelimit::NOTES_PER_SECOND as usize + 2
    );
    assert!(notes[0].contains("forgot the oldest"), "{}", notes[0]);
}
