use serde_json::json;

use super::*;

#[test]
fn a_round_echoes_the_state_unchanged_and_answers_every_input() {
    let first = json!({"name": "t", "arguments": {"a": 1}, "_meta": {"k": "v"}});
    let state = "{\"nonce\": \"n\",  \"id\": 2}";
    let asked = json!({"resultType": "input_required", "requestState": state,
        "inputRequests": {"confirm": {"method": "elicitation/create", "params": {
            "message": "?", "requestedSchema": {"type": "object", "properties": {
                "ok": {"type": "boolean", "default": true}}}}}}});
    let next = retried(&first, &asked, Some(&Elicitation::defaults())).expect("a round");
    assert_eq!(
        next,
        json!({"name": "t", "arguments": {"a": 1}, "_meta": {"k": "v"},
            "requestState": state,
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}})
    );
    // A later round without state sends none, and no stale answers.
    let asked = json!({"resultType": "input_required", "inputRequests": {}});
    let last = retried(&next, &asked, None).expect("a round");
    assert_eq!(last, first);
}
