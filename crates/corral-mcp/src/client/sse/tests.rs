//! The SSE parser on the shapes a server (or an attacker) may send.

use super::*;

fn events(items: Vec<Item>) -> Vec<Event> {
    items
        .into_iter()
        .map(|item| match item {
            Item::Event(event) => event,
            Item::TooLong { len } => panic!("unexpected over-cap event of {len} bytes"),
        })
        .collect()
}

fn data(items: Vec<Item>) -> Vec<String> {
    events(items)
        .into_iter()
        .map(|event| String::from_utf8(event.data).expect("UTF-8"))
        .collect()
}

#[test]
fn events_are_split_on_blank_lines_and_data_lines_joined() {
    let mut parser = Parser::new(1024);
    let items = parser.feed(b"event: message\nid: 7\ndata: {\"a\":\ndata: 1}\n\ndata: second\n\n");
    let got = events(items);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].event.as_deref(), Some("message"));
    assert_eq!(got[0].id.as_deref(), Some("7"));
    assert_eq!(got[0].data, b"{\"a\":\n1}");
    assert_eq!(got[1].event, None);
    assert_eq!(got[1].data, b"second");
}

#[test]
fn comments_unknown_fields_and_data_less_events_yield_nothing() {
    let mut parser = Parser::new(1024);
    let items = parser.feed(b": keepalive\n\nretry: 10\nfoo: bar\n\nid: 3\n\n:x\ndata: y\n\n");
    assert_eq!(data(items), ["y"]);
}

#[test]
fn crlf_and_cr_line_ends_are_tolerated_even_split_across_chunks() {
    let mut parser = Parser::new(1024);
    let mut items = parser.feed(b"data: a\r");
    items.extend(parser.feed(b"\n\r"));
    items.extend(parser.feed(b"\ndata: b\r\rdata:c\r\n\r\n"));
    assert_eq!(data(items), ["a", "b", "c"]);
}

#[test]
fn an_event_split_into_single_bytes_is_the_same_event() {
    let text = b"event: message\r\ndata: {\"jsonrpc\":\"2.0\"}\r\n\r\n";
    let mut parser = Parser::new(1024);
    let mut items = Vec::new();
    for byte in text {
        items.extend(parser.feed(std::slice::from_ref(byte)));
    }
    assert_eq!(data(items), ["{\"jsonrpc\":\"2.0\"}"]);
}

#[test]
fn a_field_without_a_colon_and_a_value_without_a_space() {
    let mut parser = Parser::new(1024);
    let items = parser.feed(b"data\ndata:x\ndata:  two spaces\n\n");
    assert_eq!(data(items), ["\nx\n two spaces"]);
}

#[test]
fn an_empty_data_line_is_an_event_with_empty_data() {
    // The priming event of the 2025-11-25 streamable HTTP transport.
    let mut parser = Parser::new(1024);
    let got = events(parser.feed(b"id: 0\ndata:\n\n"));
    assert_eq!(got.len(), 1);
    assert!(got[0].data.is_empty());
    assert_eq!(got[0].id.as_deref(), Some("0"));
}

#[test]
fn an_event_over_the_cap_is_dropped_whole_and_the_next_one_survives() {
    let mut parser = Parser::new(16);
    let mut items = parser.feed(b"data: 0123456789");
    items.extend(parser.feed(b"abcdefghijklmnopqrstuvwxyz\ndata: more\n"));
    items.extend(parser.feed(b"\ndata: ok\n\n"));
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(
        matches!(items[0], Item::TooLong { len } if len > 16),
        "{items:?}"
    );
    assert_eq!(data(items[1..].to_vec()), ["ok"]);
    // Nothing of the dropped event was kept.
    assert!(parser.line.capacity() <= 64);
}

#[test]
fn an_unfinished_event_is_not_dispatched() {
    let mut parser = Parser::new(1024);
    assert!(parser.feed(b"data: half").is_empty());
    assert!(parser.feed(b"\n").is_empty());
    assert_eq!(data(parser.feed(b"\n")), ["half"]);
}

#[test]
fn the_last_id_and_retry_are_kept_for_a_resumption() {
    let mut parser = Parser::new(1024);
    assert_eq!((parser.last_event_id(), parser.retry()), (None, None));
    // A priming event: an id and a retry, no data line.
    assert!(parser.feed(b"id: event-1\nretry: 500\n\n").is_empty());
    assert_eq!(parser.last_event_id(), Some("event-1"));
    assert_eq!(parser.retry(), Some(std::time::Duration::from_millis(500)));
    // Not digits only: ignored, as the specification says.
    parser.feed(b"retry: 1.5\nretry: -3\nretry:\n\n");
    assert_eq!(parser.retry(), Some(std::time::Duration::from_millis(500)));
    // The id outlives the event that set it.
    assert_eq!(
        data(parser.feed(b"id: event-2\ndata: x\n\ndata: y\n\n")),
        ["x", "y"]
    );
    assert_eq!(parser.last_event_id(), Some("event-2"));
}
