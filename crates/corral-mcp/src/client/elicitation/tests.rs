use serde_json::{Value, json};

use super::*;

fn ask(properties: Value, required: Value) -> Value {
    json!({"message": "?", "requestedSchema": {"type": "object",
        "properties": properties, "required": required}})
}

#[test]
fn defaults_accepts_with_every_default_and_leaves_out_the_rest() {
    let params = ask(
        json!({
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "verified": {"type": "boolean", "default": true},
            "nickname": {"type": "string"},
        }),
        json!([]),
    );
    assert_eq!(
        Elicitation::defaults().answer(&params),
        json!({"action": "accept", "content": {
            "name": "John Doe", "age": 30, "score": 95.5, "verified": true}})
    );
}

#[test]
fn defaults_declines_when_a_required_field_has_none() {
    let params = ask(
        json!({"name": {"type": "string", "default": "x"}, "pin": {"type": "string"}}),
        json!(["name", "pin"]),
    );
    assert_eq!(
        Elicitation::defaults().answer(&params),
        json!({"action": "decline"})
    );
}

#[test]
fn decline_declines() {
    assert_eq!(
        Elicitation::decline().answer(&ask(json!({}), json!([]))),
        json!({"action": "decline"})
    );
}

#[test]
fn input_requests_are_answered_by_key_or_refused() {
    let requests = json!({
        "confirm": {"method": "elicitation/create", "params": ask(
            json!({"ok": {"type": "boolean", "default": true}}), json!([]))},
        "where": {"method": "roots/list"},
    });
    let requests = requests.as_object().expect("an object");
    let responses = input_responses(requests, Some(&Elicitation::defaults())).expect("answered");
    assert_eq!(
        Value::Object(responses),
        json!({"confirm": {"action": "accept", "content": {"ok": true}},
               "where": {"roots": []}})
    );
    let why = input_responses(requests, None).expect_err("no handler");
    assert!(why.contains("elicitation/create"), "{why}");
    let sampling = json!({"s": {"method": "sampling/createMessage", "params": {}}});
    let sampling = sampling.as_object().expect("an object");
    assert!(input_responses(sampling, Some(&Elicitation::decline())).is_err());
}
