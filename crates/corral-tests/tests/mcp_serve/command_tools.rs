//! The operator's command tools (`serve --tools FILE`) over HTTP, with real
//! processes: an argument stays inside its one argv element whatever it
//! holds (the program receives it as it was sent, and no shell runs it);
//! unknown, missing and mistyped arguments are refused naming the field;
//! `tools_only` hides and refuses the generic tools; a task-supporting tool
//! becomes a task that `tasks/cancel` ends with its whole tree; a required
//! one refuses a request without the Tasks extension (`-32021`); one whose
//! command cannot start fails its task.

use std::path::Path;

use corral_mcp::serve::{CommandTools, ServeOptions};
use serde_json::{Value, json};

use crate::{
    harness::assert_gone,
    tasks::{ALICE, Server, member},
};

/// `options.tools` from the `tools` array of a tools file.
fn with_tools(options: &mut ServeOptions, tools: &Value) {
    let text = json!({"version": 1, "tools": tools}).to_string();
    options.tools = CommandTools::parse(&text, Path::new("test-tools.json")).expect("valid tools");
}

/// `printf '[%s]\n' ARG...`: each argv element it receives, one per line.
fn args_tool() -> Value {
    json!({
        "name": "args",
        "description": "Print each argument in brackets.",
        "arguments": {"text": {"type": "string"}, "n": {"type": "integer"},
                      "flag": {"type": "boolean"}},
        "required": ["text"],
        "argv": ["printf", "[%s]\n", "{text}", "--n={n}", "{flag}"],
    })
}

async fn call(server: &Server, name: &str, arguments: Value, tasks: bool) -> Value {
    let call = json!({"name": name, "arguments": arguments});
    server.rpc(ALICE, "tools/call", call, tasks).await
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_argument_stays_one_argv_element_whatever_it_holds() {
    let server = Server::start("serve-tools-injection", |options| {
        with_tools(options, &json!([args_tool()]));
    });
    let pwned = server.root.path("pwned");
    let p = pwned.display();
    let hostile = format!(
        "a  b; touch {p} $(touch {p}) `touch {p}` 'q' \"d\" | tee {p} && touch {p} > {p} \\ * ~"
    );
    let answer = call(
        &server,
        "args",
        json!({"text": hostile, "n": 3, "flag": true}),
        false,
    )
    .await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(text(&answer), format!("[{hostile}]\n[--n=3]\n[true]\n"));
    let structured = &answer["result"]["structuredContent"];
    assert_eq!(structured["outcome"], "exited", "{answer}");
    assert_eq!(
        structured["command"]["argv"],
        json!(["printf", "[%s]\n", hostile, "--n=3", "true"]),
        "{answer}"
    );
    assert!(!pwned.exists(), "a shell ran the argument: {answer}");

    // An optional argument not given: its element is left out.
    let answer = call(&server, "args", json!({"text": "x", "n": null}), false).await;
    assert_eq!(text(&answer), "[x]\n", "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_missing_and_mistyped_arguments_are_refused_naming_the_field() {
    let server = Server::start("serve-tools-arguments", |options| {
        let fails = json!({"name": "fails", "description": "Exit 3.",
                           "argv": ["sh", "-c", "echo said-before-failing; exit 3"]});
        with_tools(options, &json!([args_tool(), fails]));
    });
    for (arguments, says) in [
        (json!({"text": "x", "nmae": 1}), "`nmae`: no such argument"),
        (json!({}), "`text`: is required"),
        (json!({"text": 7}), "`text`: must be a string"),
        (json!({"text": "x", "n": "3"}), "`n`: must be an integer"),
        (json!({"text": "x", "n": 1.5}), "`n`: must be an integer"),
        (
            json!({"text": "x", "flag": "yes"}),
            "`flag`: must be a boolean",
        ),
    ] {
        let answer = call(&server, "args", arguments.clone(), false).await;
        assert_eq!(answer["result"]["isError"], true, "{arguments}: {answer}");
        assert!(text(&answer).contains(says), "{arguments}: {answer}");
    }
    // A command that exits non-zero: a tool error, with its output.
    let answer = call(&server, "fails", json!({}), false).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        text(&answer).contains("exited with status 3") && text(&answer).contains("said-before"),
        "{answer}"
    );
    assert_eq!(answer["result"]["structuredContent"]["exit_code"], 3);
    // The generic tools are still there.
    let answer = call(&server, "run", json!({"argv": ["true"]}), false).await;
    assert_eq!(answer["result"]["isError"], false, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_only_hides_and_refuses_the_generic_tools() {
    let server = Server::start("serve-tools-only", |options| {
        let mut named_run = args_tool();
        named_run["name"] = json!("run");
        with_tools(options, &json!([named_run]));
        options.tools_only = true;
    });
    let listed = server.rpc(ALICE, "tools/list", json!({}), false).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["run"], "{listed}");
    // `run` is the file's tool now; the generic ones are not found.
    let answer = call(&server, "run", json!({"text": "mine"}), false).await;
    assert_eq!(text(&answer), "[mine]\n", "{answer}");
    for generic in ["list_runs", "read_run", "wait_run", "kill_run"] {
        let answer = call(&server, generic, json!({"id": "x"}), false).await;
        assert_eq!(answer["result"]["isError"], true, "{generic}: {answer}");
        assert!(
            text(&answer).contains(&format!("no tool {generic:?}; the tools are run")),
            "{generic}: {answer}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_supporting_tool_becomes_a_task_and_cancel_ends_its_whole_tree() {
    let server = Server::start("serve-tools-task", |options| {
        let m = options.roots[0].join("member.sh");
        let m = m.display();
        let script = format!("sh {m} bg & setsid sh {m} setsid & sh {m} ignore & wait");
        let tree = json!({"name": "tree", "description": "A tree that waits.",
                          "argv": ["sh", "-c", script], "timeout": "60s",
                          "task_support": "optional", "task_window": "0s"});
        with_tools(options, &json!([tree]));
    });
    let (pids, _) = member(&server);
    let answer = call(&server, "tree", json!({}), true).await;
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
    let id = answer["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned();
    let (procs, _) = server.cancel_once_started(&id, &pids).await;
    assert_gone(&procs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_tool_is_a_task_at_once_and_refused_without_the_extension() {
    let server = Server::start("serve-tools-required", |options| {
        let quick = json!({"name": "quick", "description": "Done at once.",
                           "argv": ["echo", "quick-done"], "task_support": "required"});
        let broken = json!({"name": "broken", "description": "Cannot start.",
                            "argv": ["/nonexistent/corral-test/no-such-program"],
                            "task_support": "required"});
        with_tools(options, &json!([quick, broken]));
    });
    let refused = call(&server, "quick", json!({}), false).await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{refused}"
    );
    // However soon its command ends, a required tool is a task.
    let answer = call(&server, "quick", json!({}), true).await;
    let id = answer["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned();
    let done = server.until_done(ALICE, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "quick-done\n",
        "{done}"
    );

    // The operator's command cannot start: the task failed (an internal
    // error, not the caller's), with no result.
    let answer = call(&server, "broken", json!({}), true).await;
    let id = answer["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {answer}"))
        .to_owned();
    let done = server.until_done(ALICE, &id).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["error"]["code"], -32603, "{done}");
    assert!(
        done["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("could not be started")),
        "{done}"
    );
    assert!(done.get("result").is_none(), "{done}");
}
