//! What a run's caller can make the server keep: the audit line of a huge
//! command is cut, with a marker saying how much.

use serde_json::{Value, json};

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_command_leaves_a_short_audit_line_with_a_marker() {
    let audit = corral_tests::Scratch::new("audit-cut");
    let file = audit.path("audit.jsonl");
    let path = file.clone();
    let served = serve("audit-cut", move |options| options.audit = Some(path)).await;
    // 4 MB of script (the spawn fails: one argument is at most 128 KiB).
    let shell = format!("true #{}", "x".repeat(4 << 20));
    served.call("run", json!({"shell": shell})).await;
    // 10,000 arguments of 100 bytes.
    let argv: Vec<String> = std::iter::once("true".to_owned())
        .chain((0..10_000).map(|_| "y".repeat(100)))
        .collect();
    served.call("run", json!({"argv": argv})).await;

    let text = std::fs::read_to_string(&file).expect("the audit file");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{}", &text[..text.len().min(500)]);
    for line in &lines {
        assert!(
            line.len() < 32 * 1024,
            "an audit line of {} bytes",
            line.len()
        );
    }
    let first: Value = serde_json::from_str(lines[0]).expect("JSON");
    let kept = first["shell"].as_str().expect("shell");
    let cut = shell.len() - 4096;
    assert!(kept.starts_with("true #xxx"), "{kept}");
    assert!(
        kept.ends_with(&format!("…[cut {cut} bytes]")),
        "{}",
        &kept[kept.len() - 40..]
    );
    let second: Value = serde_json::from_str(lines[1]).expect("JSON");
    let argv = second["argv"].as_array().expect("argv");
    assert_eq!(argv[0], "true");
    let marker = argv.last().and_then(Value::as_str).expect("a marker");
    assert!(
        marker.starts_with("…[cut ") && marker.contains("more items"),
        "{marker}"
    );
}
