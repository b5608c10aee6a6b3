use super::*;

fn ok(line: &str) -> Message {
    classify(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"))
}

fn bad(line: &[u8]) -> Malformed {
    match classify(line) {
        Ok(message) => panic!("{:?} passed as {message:?}", String::from_utf8_lossy(line)),
        Err(malformed) => malformed,
    }
}

fn request(id: Id, method: &str) -> Message {
    Message::Request {
        id,
        method: method.to_owned(),
    }
}

#[test]
fn requests_with_integer_and_string_ids() {
    assert_eq!(
        ok(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#
        ),
        request(Id::Number(1), "initialize")
    );
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":"a-1","method":"server/discover","params":{}}"#),
        request(Id::String("a-1".into()), "server/discover")
    );
    assert_eq!(
        ok(r#"{"method":"x","id":-7}"#),
        request(Id::Number(-7), "x")
    );
    assert_eq!(
        ok(r#"{"method":"x","id":18446744073709551615}"#),
        request(Id::Number(u64::MAX.into()), "x")
    );
    // Escapes in the id and the key are decoded.
    assert_eq!(
        ok(r#"{"\u0069d":"a\u0062","method":"x"}"#),
        request(Id::String("ab".into()), "x")
    );
}

#[test]
fn notifications_and_cancellations() {
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
        Message::Notification {
            method: "notifications/initialized".into(),
            cancels: None
        }
    );
    assert_eq!(
        ok(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"x","requestId":5}}"#
        ),
        Message::Notification {
            method: "notifications/cancelled".into(),
            cancels: Some(Id::Number(5))
        }
    );
    // Only `notifications/cancelled` cancels.
    assert_eq!(
        ok(r#"{"method":"notifications/progress","params":{"requestId":5}}"#),
        Message::Notification {
            method: "notifications/progress".into(),
            cancels: None
        }
    );
}

#[test]
fn responses_results_errors_and_a_null_id_error() {
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        Message::Response {
            id: Some(Id::Number(1))
        }
    );
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}"#),
        Message::Response {
            id: Some(Id::String("x".into()))
        }
    );
    assert_eq!(
        ok(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#),
        Message::Response { id: None }
    );
    assert_eq!(
        ok(r#"{"id":1,"result":null}"#),
        Message::Response {
            id: Some(Id::Number(1))
        }
    );
}

#[test]
fn whitespace_around_and_inside_is_fine() {
    assert_eq!(
        ok(" { \"method\" : \"m\" ,\t\"id\":2 } \r"),
        request(Id::Number(2), "m")
    );
}

#[test]
fn not_json() {
    for line in [
        &b"hello from a server that logs to stdout"[..],
        b"{",
        b"{\"a\":1}}",
        b"{} {}",
        b"",
        b"{\"a\":01}",
    ] {
        assert!(matches!(bad(line), Malformed::NotJson(_)), "{line:?}");
    }
    // Raw control characters inside a string are not JSON.
    assert!(matches!(
        bad(b"{\"method\":\"a\nb\"}"),
        Malformed::NotJson(_)
    ));
}

#[test]
fn deep_nesting_is_skipped_without_recursion() {
    // The envelope reader skips values iteratively: deep nesting neither
    // overflows the stack nor counts as malformed.
    let deep = format!(
        r#"{{"method":"m","params":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(matches!(ok(&deep), Message::Notification { .. }));
    let deep_id = format!(
        r#"{{"method":"m","id":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert_eq!(bad(deep_id.as_bytes()), Malformed::BadId("an array"));
    let unbalanced = format!(r#"{{"method":"m","params":{}}}"#, "[".repeat(100_000));
    assert!(matches!(bad(unbalanced.as_bytes()), Malformed::NotJson(_)));
}

#[test]
fn invalid_utf8() {
    assert_eq!(bad(b"{\"method\":\"\xff\"}"), Malformed::NotUtf8 { at: 11 });
    assert_eq!(bad(b"\xc3"), Malformed::NotUtf8 { at: 0 });
}

#[test]
fn not_an_object_batches_included() {
    assert_eq!(
        bad(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
        Malformed::NotObject("an array")
    );
    assert_eq!(bad(b"\"text\""), Malformed::NotObject("a string"));
    assert_eq!(bad(b"42"), Malformed::NotObject("a number"));
    assert_eq!(
        bad(b"1.5"),
        Malformed::NotObject("a number that is not an integer")
    );
    assert_eq!(bad(b"true"), Malformed::NotObject("a boolean"));
    assert_eq!(bad(b"null"), Malformed::NotObject("null"));
}

#[test]
fn bad_id_types() {
    for (id, what) in [
        ("1.5", "a number that is not an integer"),
        ("1e3", "a number that is not an integer"),
        ("1.0", "a number that is not an integer"),
        ("true", "a boolean"),
        ("[1]", "an array"),
        ("{\"a\":1}", "an object"),
        ("18446744073709551616", "a number that is not an integer"),
    ] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
        assert_eq!(bad(line.as_bytes()), Malformed::BadId(what), "{line}");
        let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#);
        assert_eq!(bad(line.as_bytes()), Malformed::BadId(what), "{line}");
    }
}

#[test]
fn null_id_only_in_error_responses() {
    assert_eq!(bad(br#"{"id":null,"method":"m"}"#), Malformed::NullId);
    assert_eq!(bad(br#"{"id":null,"result":{}}"#), Malformed::NullId);
}

#[test]
fn non_string_methods() {
    for (method, what) in [
        ("1", "a number"),
        ("null", "null"),
        ("[\"m\"]", "an array"),
        ("{}", "an object"),
        ("false", "a boolean"),
    ] {
        let line = format!(r#"{{"id":1,"method":{method}}}"#);
        assert_eq!(bad(line.as_bytes()), Malformed::BadMethod(what), "{line}");
    }
}

#[test]
fn duplicate_keys_are_ambiguous() {
    assert_eq!(
        bad(br#"{"id":1,"id":2,"method":"m"}"#),
        Malformed::Duplicate("id")
    );
    assert_eq!(
        bad(br#"{"id":1,"method":"a","method":"b"}"#),
        Malformed::Duplicate("method")
    );
}

#[test]
fn objects_that_are_not_messages() {
    assert!(matches!(bad(b"{}"), Malformed::NotAMessage(_)));
    assert!(matches!(
        bad(br#"{"jsonrpc":"2.0"}"#),
        Malformed::NotAMessage(_)
    ));
    assert!(matches!(
        bad(br#"{"jsonrpc":"2.0","id":3}"#),
        Malformed::NotAMessage(_)
    ));
}

#[test]
fn every_malformed_kind_says_what_is_wrong() {
    let cases = [
        (Malformed::TooLong { len: 20, max: 10 }, "--max-frame-bytes"),
        (Malformed::NotUtf8 { at: 3 }, "UTF-8"),
        (Malformed::NotJson("x".into()), "not JSON"),
        (Malformed::NotObject("an array"), "an array"),
        (Malformed::BadId("a boolean"), "\"id\""),
        (Malformed::NullId, "null"),
        (Malformed::BadMethod("a number"), "\"method\""),
        (Malformed::Duplicate("id"), "twice"),
        (Malformed::NotAMessage("why"), "JSON-RPC"),
    ];
    for (malformed, needle) in cases {
        let text = malformed.to_string();
        assert!(text.contains(needle), "{text}");
        assert!(!text.contains('\n'));
    }
}

#[test]
fn ids_serialise_as_they_came() {
    let ids = [
        Id::Number(-1),
        Id::Number(u64::MAX.into()),
        Id::String("a\"b".into()),
    ];
    let text = serde_json::to_string(&ids).unwrap_or_default();
    assert_eq!(text, r#"[-1,18446744073709551615,"a\"b"]"#);
}
