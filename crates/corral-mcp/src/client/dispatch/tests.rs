//! The reader's frame handling, without a transport: every malformed shape
//! is dropped and counted, answers settle their call, server requests are
//! answered.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use super::*;
use crate::client::{options::CallOptions, shared::Outbound};

fn core() -> (Arc<Core>, mpsc::Receiver<Outbound>) {
    Core::new(8, 8, 64)
}

#[test]
fn every_malformed_shape_is_dropped_and_counted_by_kind() {
    let (core, _queue) = core();
    for line in [
        &b"this is not json"[..],
        b"\xff\xfe",
        b"[1,2,3]",
        b"\"a string\"",
        b"42",
        br#"{"jsonrpc":"2.0","id":{"x":1},"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":true,"result":{}}"#,
        br#"{"jsonrpc":"2.0","method":5}"#,
        br#"{"jsonrpc":"2.0","id":1}"#,
        br#"{"jsonrpc":"2.0","id":987654321,"result":{}}"#,
        br#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"both"}}"#,
    ] {
        dispatch(&core, line);
    }
    let stats = core.stats();
    assert_eq!(stats.not_json, 2, "{stats:?}");
    assert_eq!(stats.not_object, 3, "{stats:?}");
    assert_eq!(stats.bad_id, 2, "{stats:?}");
    assert_eq!(stats.bad_method, 1, "{stats:?}");
    // An id without result or error; both result and error.
    assert_eq!(stats.not_a_message, 2, "{stats:?}");
    assert_eq!(stats.unknown_id, 1, "{stats:?}");
    assert_eq!(stats.dropped(), 11);
    assert_eq!(stats.messages, 0);
}

#[tokio::test]
async fn an_answer_settles_its_call_once_and_a_second_one_is_counted() {
    let (core, mut queue) = core();
    let call = {
        let core = core.clone();
        tokio::spawn(async move {
            core.request("tools/call", None, &CallOptions::default())
                .await
        })
    };
    let frame = queue.recv().await.expect("the request is queued");
    let id = frame.request.expect("a request of ours");
    assert!(core.mark_written(&id));
    let Id::Number(n) = id else {
        panic!("numeric ids")
    };
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"ok":true}}}}"#);
    dispatch(&core, answer.as_bytes());
    dispatch(&core, answer.as_bytes());
    let result = call.await.expect("joined").expect("answered");
    assert_eq!(result["ok"], Value::Bool(true));
    assert_eq!(
        core.stats().unknown_id,
        1,
        "the duplicate answer is dropped"
    );
}

#[tokio::test]
async fn an_error_answer_keeps_its_code_message_and_data() {
    let (core, mut queue) = core();
    let call = {
        let core = core.clone();
        tokio::spawn(async move { core.request("x", None, &CallOptions::default()).await })
    };
    let id = queue.recv().await.and_then(|f| f.request).expect("queued");
    core.mark_written(&id);
    let Id::Number(n) = id else {
        panic!("numeric ids")
    };
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{n},"error":{{"code":-32602,"message":"bad","data":[1]}}}}"#
    );
    dispatch(&core, answer.as_bytes());
    let error = call.await.expect("joined").expect_err("an error");
    assert_eq!(
        error,
        crate::client::CallError::Rpc {
            code: -32602,
            message: "bad".into(),
            data: Some(serde_json::json!([1])),
        }
    );
}

#[test]
fn a_server_ping_is_answered_and_an_unknown_request_refused() {
    let (core, mut queue) = core();
    dispatch(
        &core,
        br#"{"jsonrpc":"2.0","id":"srv-ping","method":"ping"}"#,
    );
    dispatch(
        &core,
        br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage"}"#,
    );
    let ping: Value =
        serde_json::from_slice(&queue.try_recv().expect("answered").line).expect("json");
    assert_eq!(ping["id"], "srv-ping");
    assert!(ping["result"].is_object(), "{ping}");
    let refused: Value =
        serde_json::from_slice(&queue.try_recv().expect("answered").line).expect("json");
    assert_eq!(refused["id"], 3);
    assert_eq!(refused["error"]["code"], METHOD_NOT_FOUND);
    assert_eq!(core.stats().server_requests, 2);
}

#[test]
fn a_full_queue_drops_the_answer_and_counts_it_instead_of_blocking_the_reader() {
    let (core, _queue) = Core::new(1, 8, 64);
    dispatch(&core, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    dispatch(&core, br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
    assert_eq!(core.stats().answers_dropped, 1);
}

#[test]
fn the_cancellation_names_the_request() {
    let line = cancelled_notification(&Id::Number(5), "the deadline passed");
    let frame: Value = serde_json::from_slice(&line).expect("json");
    assert_eq!(frame["method"], "notifications/cancelled");
    assert_eq!(frame["params"]["requestId"], 5);
    assert_eq!(frame["params"]["reason"], "the deadline passed");
}

#[tokio::test]
async fn an_answer_to_a_request_not_yet_written_is_dropped() {
    // A server guessing the next id must not answer a request still in the
    // queue: its caller would get a result for a request never sent.
    let (core, mut queue) = core();
    let call = {
        let core = core.clone();
        tokio::spawn(async move {
            core.request("tools/call", None, &CallOptions::default())
                .await
        })
    };
    let id = queue.recv().await.and_then(|f| f.request).expect("queued");
    let Id::Number(n) = id.clone() else {
        panic!("numeric ids")
    };
    let early = format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"early":true}}}}"#);
    dispatch(&core, early.as_bytes());
    assert_eq!(core.stats().unknown_id, 1, "dropped, not delivered");
    assert!(core.mark_written(&id), "the call still waits");
    let answer = format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"early":false}}}}"#);
    dispatch(&core, answer.as_bytes());
    let result = call.await.expect("joined").expect("answered");
    assert_eq!(result["early"], Value::Bool(false));
}

#[test]
fn an_elicitation_is_answered_by_the_policy_and_refused_without_one() {
    let ask = br#"{"jsonrpc":"2.0","id":"e1","method":"elicitation/create","params":{
        "message":"?","requestedSchema":{"type":"object","properties":{
        "name":{"type":"string","default":"John Doe"}}}}}"#;
    let answer = |queue: &mut mpsc::Receiver<Outbound>| -> Value {
        let frame = queue.try_recv().expect("an answer is queued");
        assert!(frame.answer);
        serde_json::from_slice(&frame.line).expect("JSON")
    };

    let (core, mut queue) = core();
    dispatch(&core, ask);
    let refused = answer(&mut queue);
    assert_eq!(refused["id"], "e1");
    assert_eq!(refused["error"]["code"], METHOD_NOT_FOUND);

    *lock(&core.elicitation) = Some(crate::client::Elicitation::defaults());
    dispatch(&core, ask);
    let answered = answer(&mut queue);
    assert_eq!(
        answered,
        serde_json::json!({"jsonrpc": "2.0", "id": "e1", "result": {
            "action": "accept", "content": {"name": "John Doe"}}})
    );
}
