use serde_json::json;

use super::*;

#[test]
fn a_refusal_is_retried_only_when_it_lists_our_version() {
    let data = json!({"supported": ["2026-07-28"], "requested": "2099-01-01"});
    assert!(offers(Some(&data), MODERN));
    assert!(!offers(Some(&json!({"supported": ["2025-11-25"]})), MODERN));
    assert!(!offers(Some(&json!({"supported": "2026-07-28"})), MODERN));
    assert!(!offers(None, MODERN));
}
