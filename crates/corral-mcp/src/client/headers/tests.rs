use serde_json::{Value, json};

use super::*;

fn schema(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

fn tools(name: &str, input: Value) -> ToolParams {
    let params = annotations(&schema(input)).expect("valid annotations");
    ToolParams::from([(name.to_owned(), params)])
}

fn get<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

#[test]
fn the_specifications_encoding_examples() {
    assert_eq!(encode("us-west1"), "us-west1");
    assert_eq!(encode("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
    assert_eq!(encode(" padded "), "=?base64?IHBhZGRlZCA=?=");
    assert_eq!(encode("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
    assert_eq!(
        encode("=?base64?literal?="),
        "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    );
    assert_eq!(encode("us west 1"), "us west 1");
    assert_eq!(encode("\tindented"), "=?base64?CWluZGVudGVk?=");
    assert_eq!(encode(""), "");
}

#[test]
fn base64_pads_every_length() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foob"), "Zm9vYg==");
    assert_eq!(base64(&[0xff, 0xfe, 0xfd]), "//79");
}

#[test]
fn every_request_says_its_method_and_the_version_of_its_meta() {
    let frame = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": {META_VERSION: "2026-07-28"}}});
    let headers = mirror(&frame, Some("2025-11-25"), &ToolParams::new());
    assert_eq!(get(&headers, "mcp-protocol-version"), Some("2026-07-28"));
    assert_eq!(get(&headers, "mcp-method"), Some("tools/list"));
    assert_eq!(get(&headers, "mcp-name"), None);

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let headers = mirror(&note, Some("2025-11-25"), &ToolParams::new());
    assert_eq!(get(&headers, "mcp-protocol-version"), Some("2025-11-25"));
    assert_eq!(
        get(&headers, "mcp-method"),
        Some("notifications/initialized")
    );

    let answer = json!({"jsonrpc": "2.0", "id": 7, "result": {}});
    assert_eq!(mirror(&answer, None, &ToolParams::new()), vec![]);
}

#[test]
fn names_come_from_name_uri_or_task_id() {
    let none = ToolParams::new();
    let call = json!({"method": "tools/call", "params": {"name": "my-hyphenated-tool"}});
    assert_eq!(
        get(&mirror(&call, None, &none), "mcp-name"),
        Some("my-hyphenated-tool")
    );
    let prompt = json!({"method": "prompts/get", "params": {"name": "naïve"}});
    assert_eq!(
        get(&mirror(&prompt, None, &none), "mcp-name"),
        Some("=?base64?bmHDr3Zl?=")
    );
    let read = json!({"method": "resources/read", "params": {"uri": "file:///a%20b.txt"}});
    assert_eq!(
        get(&mirror(&read, None, &none), "mcp-name"),
        Some("file:///a%20b.txt")
    );
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        let task = json!({"method": method, "params": {"taskId": "task-00ff"}});
        assert_eq!(
            get(&mirror(&task, None, &none), "mcp-name"),
            Some("task-00ff"),
            "{method}"
        );
    }
}

#[test]
fn annotated_parameters_are_mirrored_and_nothing_else() {
    let tools = tools(
        "sql",
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "method": {"type": "string", "x-mcp-header": "Method"},
            "where": {"type": "object", "properties": {
                "zone": {"type": "string", "x-mcp-header": "Zone"}}},
            "query": {"type": "string"},
        }}),
    );
    let frame = json!({"method": "tools/call", "params": {"name": "sql", "arguments": {
        "region": " us", "priority": 42, "verbose": null, "method": "m",
        "where": {"zone": "b"}, "query": "SELECT 1"}}});
    let headers = mirror(&frame, None, &tools);
    assert_eq!(get(&headers, "mcp-param-region"), Some("=?base64?IHVz?="));
    assert_eq!(get(&headers, "mcp-param-priority"), Some("42"));
    assert_eq!(get(&headers, "mcp-param-verbose"), None, "null: no header");
    assert_eq!(get(&headers, "mcp-param-method"), Some("m"));
    assert_eq!(get(&headers, "mcp-method"), Some("tools/call"));
    assert_eq!(get(&headers, "mcp-param-zone"), Some("b"));
    assert_eq!(get(&headers, "mcp-param-query"), None);
    let flag = json!({"method": "tools/call", "params": {"name": "sql", "arguments": {
        "verbose": false}}});
    assert_eq!(
        get(&mirror(&flag, None, &tools), "mcp-param-verbose"),
        Some("false")
    );
}

#[test]
fn invalid_annotations_reject_the_tool() {
    let bad = |property: Value| {
        annotations(&schema(
            json!({"type": "object", "properties": {"p": property}}),
        ))
        .expect_err(&format!("{property} is invalid"))
    };
    bad(json!({"type": "string", "x-mcp-header": ""}));
    bad(json!({"type": "object", "x-mcp-header": "Data"}));
    bad(json!({"type": "array", "items": {"type": "string"}, "x-mcp-header": "Items"}));
    bad(json!({"type": "null", "x-mcp-header": "Nil"}));
    bad(json!({"type": "number", "x-mcp-header": "Float"}));
    bad(json!({"type": "string", "x-mcp-header": "My Region"}));
    bad(json!({"type": "string", "x-mcp-header": "Region:Primary"}));
    bad(json!({"type": "string", "x-mcp-header": "Région"}));
    bad(json!({"type": "string", "x-mcp-header": "Region\t1"}));
    bad(json!({"type": "string", "x-mcp-header": 7}));
    bad(json!({"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}));
    let duplicate = json!({"type": "object", "properties": {
        "a": {"type": "string", "x-mcp-header": "MyField"},
        "b": {"type": "string", "x-mcp-header": "myfield"}}});
    assert!(
        annotations(&schema(duplicate))
            .expect_err("a duplicate")
            .contains("unique")
    );
    let composed = json!({"type": "object", "anyOf": [{"properties": {
        "a": {"type": "string", "x-mcp-header": "A"}}}]});
    assert!(annotations(&schema(composed)).is_err());
    let plain = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    assert_eq!(annotations(&schema(plain)), Ok(vec![]));
}
