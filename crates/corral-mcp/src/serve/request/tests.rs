use serde_json::json;

use super::*;

fn map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn run(value: Value) -> Result<RunArgs, FieldError> {
    run_args(&map(value))
}

fn run_err(value: Value) -> FieldError {
    match run(value.clone()) {
        Ok(args) => panic!("{value} passed as {args:?}"),
        Err(error) => error,
    }
}

/// The error names `field`, and its rule contains every one of `words`.
fn assert_rule(error: &FieldError, field: &str, words: &[&str]) {
    assert_eq!(error.field, field, "{error}");
    for word in words {
        assert!(error.rule.contains(word), "{error} lacks {word:?}");
    }
}

#[test]
fn display_names_the_field_then_the_rule() {
    let error = FieldError::new("env.X", "must be a string");
    assert_eq!(error.to_string(), "`env.X`: must be a string");
}

#[test]
fn run_argv_with_defaults() {
    let args = run(json!({"argv": ["ls", "-l", ""]})).expect("valid");
    assert_eq!(
        args,
        RunArgs {
            program: Program::Argv(vec!["ls".into(), "-l".into(), String::new()]),
            cwd: None,
            env: Vec::new(),
            stdin: String::new(),
            timeout: None,
            kill_after: None,
            background: false,
        }
    );
}

#[test]
fn run_every_field() {
    let args = run(json!({
        "shell": "make -j2 | tail",
        "cwd": "sub/dir",
        "env": {"A": "1", "B": ""},
        "stdin": "input\n",
        "timeout": "1m30s",
        "kill_after": 2.5,
        "background": true,
    }))
    .expect("valid");
    assert_eq!(args.program, Program::Shell("make -j2 | tail".into()));
    assert_eq!(args.cwd.as_deref(), Some("sub/dir"));
    assert_eq!(
        args.env,
        vec![("A".into(), "1".into()), ("B".into(), String::new())]
    );
    assert_eq!(args.stdin, "input\n");
    assert_eq!(args.timeout, Some(Duration::from_secs(90)));
    assert_eq!(args.kill_after, Some(Duration::from_millis(2500)));
    assert!(args.background);
}

#[test]
fn run_null_counts_as_absent() {
    let args =
        run(json!({"argv": ["true"], "shell": null, "cwd": null, "timeout": null})).expect("valid");
    assert_eq!(args.program, Program::Argv(vec!["true".into()]));
    assert_eq!(args.cwd, None);
    assert_eq!(args.timeout, None);
}

#[test]
fn run_unknown_field_lists_the_allowed_ones() {
    let error = run_err(json!({"argv": ["ls"], "command": "ls"}));
    assert_rule(
        &error,
        "command",
        &["unknown field", "`argv`", "`shell`", "`background`"],
    );
}

#[test]
fn run_both_or_neither_program() {
    assert_rule(
        &run_err(json!({"argv": ["ls"], "shell": "ls"})),
        "argv",
        &["not both", "`shell`"],
    );
    assert_rule(&run_err(json!({})), "argv", &["either", "`shell`"]);
    assert_rule(
        &run_err(json!({"cwd": "."})),
        "argv",
        &["either", "`shell`"],
    );
}

#[test]
fn run_argv_rules() {
    assert_rule(&run_err(json!({"argv": []})), "argv", &["non-empty array"]);
    assert_rule(
        &run_err(json!({"argv": "ls -l"})),
        "argv",
        &["array of strings"],
    );
    assert_rule(
        &run_err(json!({"argv": ["sleep", 10]})),
        "argv[1]",
        &["string", "\"10\""],
    );
    assert_rule(&run_err(json!({"argv": [""]})), "argv[0]", &["program"]);
    assert_rule(
        &run_err(json!({"argv": ["ls", "a\u{0}b"]})),
        "argv[1]",
        &["NUL"],
    );
}

#[test]
fn run_shell_rules() {
    assert_rule(&run_err(json!({"shell": ""})), "shell", &["empty", "sh -c"]);
    assert_rule(&run_err(json!({"shell": ["ls"]})), "shell", &["string"]);
    assert_rule(&run_err(json!({"shell": "echo \u{0}"})), "shell", &["NUL"]);
}

#[test]
fn run_cwd_rules() {
    assert_rule(
        &run_err(json!({"argv": ["ls"], "cwd": 3})),
        "cwd",
        &["string"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "cwd": "a\u{0}"})),
        "cwd",
        &["NUL"],
    );
}

#[test]
fn run_env_rules() {
    assert_rule(
        &run_err(json!({"argv": ["ls"], "env": ["A=1"]})),
        "env",
        &["object"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "env": {"PORT": 8080}})),
        "env.PORT",
        &["must be a string"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "env": {"A=B": "1"}})),
        "env",
        &["\"A=B\"", "`=`"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "env": {"": "1"}})),
        "env",
        &["non-empty"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "env": {"A\u{0}": "1"}})),
        "env",
        &["NUL"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "env": {"A": "x\u{0}"}})),
        "env.A",
        &["NUL"],
    );
}

#[test]
fn run_stdin_and_background_rules() {
    assert_rule(
        &run_err(json!({"argv": ["cat"], "stdin": 5})),
        "stdin",
        &["string"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "background": "true"})),
        "background",
        &["boolean"],
    );
    // NUL is fine on standard input: it is bytes, not an argument.
    let args = run(json!({"argv": ["cat"], "stdin": "a\u{0}b"})).expect("valid");
    assert_eq!(args.stdin, "a\u{0}b");
}

#[test]
fn run_durations_name_their_field() {
    assert_rule(
        &run_err(json!({"argv": ["ls"], "timeout": "soon"})),
        "timeout",
        &["number of seconds"],
    );
    assert_rule(
        &run_err(json!({"argv": ["ls"], "kill_after": -1})),
        "kill_after",
        &["negative"],
    );
}

#[test]
fn duration_numbers() {
    let ok = |value: Value| duration("t", &value).expect("valid");
    assert_eq!(ok(json!(0)), Duration::ZERO);
    assert_eq!(ok(json!(10)), Duration::from_secs(10));
    assert_eq!(ok(json!(1.5)), Duration::from_millis(1500));
    assert_eq!(ok(json!(1e9)), Duration::from_secs(1_000_000_000));
    assert_eq!(ok(json!(-0.0)), Duration::ZERO);
}

#[test]
fn duration_strings() {
    let ok = |text: &str| duration("t", &json!(text)).expect("valid");
    assert_eq!(ok("1.5s"), Duration::from_millis(1500));
    assert_eq!(ok("2m"), Duration::from_secs(120));
    assert_eq!(ok("500ms"), Duration::from_millis(500));
    assert_eq!(ok("10"), Duration::from_secs(10));
}

#[test]
fn duration_refusals_name_both_forms() {
    for value in [
        json!(-1),
        json!(-0.001),
        json!(1e9 + 1.0),
        json!(u64::MAX),
        json!("soon"),
        json!("-5s"),
        json!(""),
        json!(true),
        json!([1]),
        json!({"secs": 1}),
    ] {
        let error = duration("timeout", &value).expect_err(&value.to_string());
        assert_eq!(error.field, "timeout");
        assert!(error.rule.contains("number of seconds"), "{value}: {error}");
        assert!(
            error.rule.contains("ms") || error.rule.contains("1m30s"),
            "{value}: {error}"
        );
        // A run's `timeout: 0` times out at once: no message says 0 is
        // no limit.
        assert!(!error.rule.contains("no limit"), "{value}: {error}");
    }
}

#[test]
fn read_defaults_and_values() {
    assert_eq!(
        read_args(&map(json!({"id": "r1"}))),
        Ok(ReadArgs {
            id: "r1".into(),
            stdout_offset: 0,
            stderr_offset: 0,
            max_bytes: None,
        })
    );
    assert_eq!(
        read_args(&map(json!({
            "id": "r1", "stdout_offset": 10, "stderr_offset": 3.0, "max_bytes": 16_777_216
        }))),
        Ok(ReadArgs {
            id: "r1".into(),
            stdout_offset: 10,
            stderr_offset: 3,
            max_bytes: Some(16 * 1024 * 1024),
        })
    );
}

#[test]
fn read_rules() {
    let err = |value: Value| read_args(&map(value)).expect_err("refused");
    assert_rule(
        &err(json!({"id": "r", "stdout_offset": -1})),
        "stdout_offset",
        &["non-negative integer"],
    );
    assert_rule(
        &err(json!({"id": "r", "stderr_offset": 1.5})),
        "stderr_offset",
        &["integer"],
    );
    assert_rule(
        &err(json!({"id": "r", "stderr_offset": "0"})),
        "stderr_offset",
        &["integer"],
    );
    assert_rule(
        &err(json!({"id": "r", "max_bytes": 0})),
        "max_bytes",
        &["positive", "16 MiB"],
    );
    assert_rule(
        &err(json!({"id": "r", "max_bytes": 16_777_217})),
        "max_bytes",
        &["16 MiB"],
    );
    assert_rule(
        &err(json!({"id": "r", "offset": 0})),
        "offset",
        &["`stdout_offset`", "`max_bytes`"],
    );
    assert_rule(&err(json!({"stdout_offset": 0})), "id", &["required"]);
}

#[test]
fn id_rules() {
    assert_eq!(
        id_args(&map(json!({"id": "x".repeat(64)}))),
        Ok("x".repeat(64))
    );
    // Characters, not bytes.
    assert_eq!(
        id_args(&map(json!({"id": "é".repeat(64)}))),
        Ok("é".repeat(64))
    );
    for bad in [json!(""), json!("x".repeat(65)), json!(7), json!(["r1"])] {
        let error = id_args(&map(json!({"id": bad}))).expect_err("refused");
        assert_rule(&error, "id", &["run id", "64"]);
    }
    assert_rule(
        &id_args(&map(json!({}))).expect_err("refused"),
        "id",
        &["required"],
    );
    assert_rule(
        &id_args(&map(json!({"id": "r", "force": true}))).expect_err("refused"),
        "force",
        &["`id`"],
    );
}

#[test]
fn wait_rules() {
    assert_eq!(
        wait_args(&map(json!({"id": "r", "timeout": "2m"}))),
        Ok(WaitArgs {
            id: "r".into(),
            timeout: Some(Duration::from_secs(120)),
        })
    );
    assert_eq!(
        wait_args(&map(json!({"id": "r"}))),
        Ok(WaitArgs {
            id: "r".into(),
            timeout: None,
        })
    );
    assert_rule(
        &wait_args(&map(json!({"id": "r", "timeout": "x"}))).expect_err("refused"),
        "timeout",
        &["number of seconds"],
    );
    assert_rule(
        &wait_args(&map(json!({"id": "r", "max_bytes": 1}))).expect_err("refused"),
        "max_bytes",
        &["`id`", "`timeout`"],
    );
}

#[test]
fn no_args_refuses_any_field() {
    assert_eq!(no_args(&Map::new()), Ok(()));
    assert_rule(
        &no_args(&map(json!({"all": true}))).expect_err("refused"),
        "all",
        &["no arguments"],
    );
}
