//! An agent-side program on corral's MCP client runtime: two servers, each
//! run as an owned process tree, a tool call with a deadline on each, the
//! honest outcome of each, and a shutdown that leaves nothing running.
//!
//! Run it from the repository (the servers are the test peers:
//! server-everything from npm and the Python SDK fixture that starts three
//! helpers which escape a naive kill):
//!
//! ```text
//! scripts/install-mcp-peers
//! cargo run -p corral-mcp --example agent
//! ```

use std::{path::PathBuf, time::Duration};

use corral_mcp::client::{CallError, CallOptions, ConnectOptions, Manager, Server};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let peers = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp-peers");
    let mut everything = corral::Command::new("node");
    everything
        .arg(peers.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("stdio");
    let mut fixture = corral::Command::new(peers.join("../../.venv-mcp/bin/python"));
    fixture.arg(peers.join("fixture_server.py"));

    let manager = Manager::new();
    for (name, command) in [("everything", everything), ("fixture", fixture)] {
        let connection = manager
            .connect(name, Server::Stdio(command), ConnectOptions::default())
            .await?;
        println!(
            "{name}: connected ({:?} era, protocol {}), server pid {:?}",
            connection.peer().era,
            connection.peer().protocol_version.as_str(),
            connection.server_pid()
        );
    }

    // A quick call within its deadline.
    let answer = manager
        .call_tool(
            "everything",
            "echo",
            args(json!({"message": "hello"})),
            &CallOptions::timeout(Duration::from_secs(5)),
        )
        .await;
    println!("everything/echo: {}", outcome(&answer));

    // A slow call past its deadline: the outcome is unknown, and the runtime
    // neither waits longer nor sends it again.
    let answer = manager
        .call_tool(
            "fixture",
            "sleep",
            args(json!({"seconds": 5})),
            &CallOptions::timeout(Duration::from_millis(500)),
        )
        .await;
    println!("fixture/sleep: {}", outcome(&answer));

    // Every server's whole tree is gone when this returns.
    for (name, teardown) in manager.shutdown().await {
        let Some(teardown) = teardown else { continue };
        let report = teardown.finished.as_ref().map(|finished| &finished.report);
        println!(
            "{name}: torn down in {:?} ({}); signals sent: {}, survivors: {}",
            teardown.took,
            teardown.ended,
            report.map_or(0, |report| report.signals.len()),
            report.map_or(0, |report| report.survivors.len()),
        );
    }
    Ok(())
}

fn args(value: Value) -> Option<Map<String, Value>> {
    value.as_object().cloned()
}

/// One line saying how a call ended.
fn outcome(answer: &Result<CallToolResult, CallError>) -> String {
    match answer {
        Ok(result) => {
            let text: Vec<&str> = result
                .content
                .iter()
                .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
                .collect();
            let kind = if result.is_error == Some(true) {
                "tool error"
            } else {
                "ok"
            };
            format!("{kind}: {}", text.join(" "))
        }
        Err(CallError::OutcomeUnknown {
            request_id, reason, ..
        }) => format!(
            "outcome unknown for request {request_id} ({reason}): the server may have done the \
             work; cancelling undid nothing; not retried"
        ),
        Err(CallError::NotSent { reason }) => format!("not sent ({reason}): safe to try again"),
        Err(error) => format!("error: {error}"),
    }
}
