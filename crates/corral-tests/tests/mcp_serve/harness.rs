//! A served runner and an rmcp client connected to it.

#![allow(dead_code)]

use std::{path::PathBuf, time::Duration};

use corral_mcp::serve::{CorralServer, Runner, ServeOptions};
use corral_tests::Proc;
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult},
    service::RunningService,
};
use serde_json::{Map, Value};

pub struct Served {
    pub client: RunningService<RoleClient, ()>,
    pub runner: Runner,
    pub root: corral_tests::Scratch,
}

/// Options with a scratch root.
pub fn options(root: &corral_tests::Scratch) -> ServeOptions {
    let mut options = ServeOptions::default();
    options.roots = vec![root.0.clone()];
    options.kill_after = Duration::from_millis(500);
    // A backend that holds `setsid` escapes without root too.
    options.backend = corral_tests::containing_backend();
    options
}

pub async fn serve(name: &str, change: impl FnOnce(&mut ServeOptions)) -> Served {
    let root = corral_tests::Scratch::new(name);
    let mut options = options(&root);
    change(&mut options);
    let runner = Runner::new(options).expect("a runner");
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let server = CorralServer::new(runner.clone());
    tokio::spawn(async move {
        if let Ok(service) = server.serve(server_io).await {
            let _ = service.waiting().await;
        }
    });
    let client = ().serve(client_io).await.expect("the client connects");
    Served {
        client,
        runner,
        root,
    }
}

pub fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

impl Served {
    pub async fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args(arguments));
        tokio::time::timeout(
            Duration::from_secs(60),
            self.client.peer().call_tool(params),
        )
        .await
        .expect("answered within 60 s")
        .expect("a tool result")
    }

    /// `run` and its structured result.
    pub async fn run(&self, arguments: Value) -> Value {
        let result = self.call("run", arguments).await;
        structured(&result)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path(name)
    }
}

pub fn structured(result: &CallToolResult) -> Value {
    result.structured_content.clone().unwrap_or(Value::Null)
}

pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The processes a command recorded as `PID START_TIME` lines in `file`.
pub fn recorded(file: &std::path::Path) -> Vec<Proc> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let (pid, start) = line.trim().split_once(' ')?;
            Some(Proc {
                pid: pid.parse().ok()?,
                start_time: start.parse().ok()?,
            })
        })
        .collect()
}

/// A shell snippet that records `$PID_EXPR`'s identity into `file`.
pub fn record(pid: &str, file: &std::path::Path) -> String {
    format!(
        "echo \"{pid} $(cut -d' ' -f22 /proc/{pid}/stat)\" >> {}",
        file.display()
    )
}

pub fn assert_gone(procs: &[Proc]) {
    let alive: Vec<&Proc> = procs.iter().filter(|p| p.is_alive()).collect();
    let _guard = corral_tests::Guard::of(procs.iter().copied());
    assert!(alive.is_empty(), "still running: {alive:?}");
}

pub fn json_of(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
