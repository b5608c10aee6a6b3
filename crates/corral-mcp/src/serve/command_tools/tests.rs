use std::path::Path;

use serde_json::{Value, json};

use super::CommandTools;

fn parse(tools: &Value) -> Result<CommandTools, String> {
    CommandTools::parse(&json!({ "tools": tools }).to_string(), Path::new("t.json"))
        .map_err(|error| error.to_string())
}

fn greet() -> Value {
    json!({"name": "greet", "description": "hello",
           "arguments": {"name": {"type": "string"}, "times": {"type": "integer"},
                         "loud": {"type": "boolean", "default": false}},
           "required": ["name"],
           "argv": ["greet", "--name={name}", "{times}", "--loud={loud}", "{{lit}}"]})
}

/// The refusal of a call of `tool` with `arguments`: "field: rule".
fn refused_call(tools: &CommandTools, tool: &str, arguments: &Value) -> String {
    let error = tools
        .get(tool)
        .expect("the tool")
        .argv(&args(arguments))
        .expect_err("refused");
    format!("{}: {}", error.field, error.rule)
}

fn args(value: &Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

#[test]
fn placeholders_fill_their_own_element_and_escapes_are_literal() {
    let tools = parse(&json!([greet()])).expect("loads");
    let tool = tools.get("greet").expect("greet");
    let argv = tool
        .argv(&args(
            &json!({"name": "a b; rm -rf / $(x) '\"", "times": 3}),
        ))
        .expect("valid");
    assert_eq!(
        argv,
        [
            "greet",
            "--name=a b; rm -rf / $(x) '\"",
            "3",
            "--loud=false",
            "{lit}"
        ]
    );
}

#[test]
fn an_absent_optional_argument_drops_its_element() {
    let tools = parse(&json!([greet()])).expect("loads");
    let argv = tools
        .get("greet")
        .expect("greet")
        .argv(&args(&json!({"name": "x", "times": null})));
    assert_eq!(
        argv.expect("valid"),
        ["greet", "--name=x", "--loud=false", "{lit}"]
    );
}

#[test]
fn calls_are_refused_naming_the_field() {
    let tools = parse(&json!([greet()])).expect("loads");
    let tool = tools.get("greet").expect("greet");
    for (call, field, says) in [
        (json!({}), "name", "required"),
        (json!({"name": 1}), "name", "must be a string"),
        (
            json!({"name": "x", "times": 1.5}),
            "times",
            "must be an integer",
        ),
        (
            json!({"name": "x", "times": "3"}),
            "times",
            "must be an integer",
        ),
        (
            json!({"name": "x", "loud": "yes"}),
            "loud",
            "must be a boolean",
        ),
        (
            json!({"name": "x", "nmae": "y"}),
            "nmae",
            "no such argument",
        ),
        (json!({"name": "a\u{0}b"}), "name", "NUL"),
    ] {
        let error = tool.argv(&args(&call)).expect_err("refused");
        assert_eq!(error.field, field, "{call}: {error}");
        assert!(error.rule.contains(says), "{call}: {error}");
    }
}

#[test]
fn broken_files_are_refused_naming_the_tool_and_the_rule() {
    let with = |change: Value| {
        let mut tool = greet();
        for (key, value) in change.as_object().expect("object") {
            tool[key] = value.clone();
        }
        parse(&json!([tool])).expect_err("refused")
    };
    for (error, says) in [
        (
            with(json!({"argv": ["greet", "{nmae}"]})),
            "{nmae} names no argument",
        ),
        (with(json!({"argv": ["{name}"]})), "the program is fixed"),
        (with(json!({"argv": ["greet", "{name"]})), "a { with no }"),
        (with(json!({"argv": ["greet", "x}"]})), "a } with no {"),
        (
            with(json!({"argv": ["greet", "{name}", "{loud}"]})),
            "\"times\" is used by no argv",
        ),
        (with(json!({"argv": []})), "\"argv\" is empty"),
        (with(json!({"name": "has space"})), "tool-name rules"),
        (
            with(json!({"required": ["nobody"]})),
            "not in \"arguments\"",
        ),
        (with(json!({"argvv": []})), "unknown field `argvv`"),
        (with(json!({"timeout": "soon"})), "timeout"),
        (
            with(json!({"task_support": "sometimes"})),
            "unknown variant `sometimes`",
        ),
        (with(json!({"task_window": "1s"})), "\"task_window\" is for"),
        (
            with(json!({"arguments": {"name": {"type": "string", "default": 3}}})),
            "default 3 is not a string",
        ),
    ] {
        assert!(error.starts_with("--tools t.json: "), "{error}");
        assert!(
            error.contains("tools[0] (\"greet\")") || error.contains("has space"),
            "{error}"
        );
        assert!(error.contains(says), "{says:?} not in: {error}");
    }
    let twice = parse(&json!([greet(), greet()])).expect_err("refused");
    assert!(twice.contains("a second tool named \"greet\""), "{twice}");
}

#[test]
fn bad_json_is_refused_with_its_line_and_column() {
    let error = CommandTools::parse(
        "{\"tools\": [\n  {\"name\": \"x\",,}]}",
        Path::new("t.json"),
    )
    .expect_err("refused")
    .to_string();
    assert!(error.contains("line 2 column"), "{error}");
}

#[test]
fn a_value_that_would_read_as_an_option_is_refused_unless_options_ended() {
    let tools = parse(&json!([
        {"name": "log", "description": "git log of a revision",
         "arguments": {"rev": {"type": "string"}, "n": {"type": "integer"}},
         "required": ["rev", "n"],
         "argv": ["git", "log", "{rev}", "-n", "{n}"]},
        {"name": "grep", "description": "grep for a pattern",
         "arguments": {"pattern": {"type": "string"}}, "required": ["pattern"],
         "argv": ["grep", "-r", "--", "{pattern}", "."]},
    ]))
    .expect("loads");
    let log = tools.get("log").expect("log");
    let refused = log
        .argv(&args(&json!({"rev": "--output=/etc/passwd", "n": 3})))
        .expect_err("an option chosen by the caller");
    assert_eq!(refused.field, "rev");
    assert!(refused.rule.contains("as an option"), "{}", refused.rule);
    assert!(
        log.argv(&args(&json!({"rev": "main", "n": -1}))).is_err(),
        "-1 too"
    );
    assert_eq!(
        log.argv(&args(&json!({"rev": "main", "n": 3})))
            .expect("operands"),
        ["git", "log", "main", "-n", "3"]
    );
    // After "--" the program reads no options: a leading '-' is an operand.
    let grep = tools.get("grep").expect("grep");
    assert_eq!(
        grep.argv(&args(&json!({"pattern": "-rf"})))
            .expect("after --"),
        ["grep", "-r", "--", "-rf", "."]
    );
}

/// A `--` ends the options only where the program reads it so: not after
/// an element left out (`sort -o -- X` takes `--` as `-o`'s value), and
/// only up to the next fixed element, which may be another program's name
/// (`env -- sort {file}`: `sort` reads options again). A value that begins
/// with `@` is a response file to gcc, rustc or javac, `--` or not. A
/// default is the operator's choice, not the caller's.
#[test]
fn a_double_dash_protects_only_what_follows_it_directly() {
    let tools = parse(&json!([
        {"name": "wrapped", "description": "sort, through env",
         "arguments": {"file": {"type": "string"}}, "required": ["file"],
         "argv": ["env", "--", "sort", "{file}"]},
        {"name": "sort", "description": "sort, maybe with a flag",
         "arguments": {"flag": {"type": "string"}, "file": {"type": "string"}},
         "required": ["file"],
         "argv": ["sort", "{flag}", "--", "{file}"]},
        {"name": "cc", "description": "compile",
         "arguments": {"src": {"type": "string"}}, "required": ["src"],
         "argv": ["cc", "-c", "--", "{src}"]},
        {"name": "head", "description": "head with an operator's default",
         "arguments": {"n": {"type": "string", "default": "-5"}},
         "argv": ["head", "{n}"]},
    ]))
    .expect("loads");
    let refused = |tool: &str, arguments: Value| refused_call(&tools, tool, &arguments);
    let error = refused("wrapped", json!({"file": "--output=/tmp/pwned"}));
    assert!(
        error.starts_with("file:") && error.contains("as an option"),
        "{error}"
    );
    let error = refused("sort", json!({"file": "--files0-from=/etc/shadow"}));
    assert!(
        error.starts_with("file:") && error.contains("as an option"),
        "{error}"
    );
    assert_eq!(
        tools
            .get("sort")
            .expect("sort")
            .argv(&args(&json!({"flag": "data", "file": "-x"})))
            .expect("every element before the -- is there"),
        ["sort", "data", "--", "-x"]
    );
    let error = refused("cc", json!({"src": "@/etc/shadow"}));
    assert!(
        error.starts_with("src:") && error.contains("'@'"),
        "{error}"
    );
    assert_eq!(
        tools
            .get("head")
            .expect("head")
            .argv(&args(&json!({})))
            .expect("the operator's default"),
        ["head", "-5"]
    );
    let error = refused("head", json!({"n": "--follow"}));
    assert!(error.starts_with("n:"), "{error}");
    // An empty value first does not hide the next one's leading '-'.
    let tools = parse(&json!([
        {"name": "pair", "description": "two values in one element",
         "arguments": {"a": {"type": "string", "default": ""}, "b": {"type": "string"}},
         "required": ["b"],
         "argv": ["tail", "{a}{b}"]},
    ]))
    .expect("loads");
    let error = tools
        .get("pair")
        .expect("pair")
        .argv(&args(&json!({"b": "--pid=1"})))
        .expect_err("the option comes from b");
    assert_eq!(error.field, "b", "{}", error.rule);
}

/// An element that holds a value that may be left out and another value
/// would be left out whole with the other in it: refused at load. So is a
/// default holding NUL.
#[test]
fn an_element_that_would_drop_another_value_is_refused_at_load() {
    let error = parse(&json!([
        {"name": "connect", "description": "connect",
         "arguments": {"host": {"type": "string"}, "port": {"type": "integer"}},
         "required": ["host"],
         "argv": ["nc", "{host}:{port}"]},
    ]))
    .expect_err("{port} may be left out with {host}");
    assert!(error.contains("{port} may be left out"), "{error}");
    parse(&json!([
        {"name": "connect", "description": "connect",
         "arguments": {"host": {"type": "string"}, "port": {"type": "integer", "default": 80}},
         "required": ["host"],
         "argv": ["nc", "{host}:{port}"]},
    ]))
    .expect("with a default, both are always there");
    let error = parse(&json!([
        {"name": "echo", "description": "echo",
         "arguments": {"text": {"type": "string", "default": "a\u{0}b"}},
         "argv": ["echo", "{text}"]},
    ]))
    .expect_err("a NUL in a default");
    assert!(error.contains("NUL"), "{error}");
}

/// An empty value is a value the caller chose too: one that hands the
/// start of its element to fixed text that reads as an option, or leaves
/// an option (`-o{out}`) without its value, is refused; so, at load, is an
/// element that may be left out right after an option that would then
/// take the next element as its value.
#[test]
fn an_empty_value_cannot_make_an_option_either() {
    let tools = parse(&json!([
        {"name": "versioned", "description": "name-version",
         "arguments": {"name": {"type": "string"}, "ver": {"type": "string"}},
         "required": ["name", "ver"],
         "argv": ["sort", "{name}-{ver}"]},
        {"name": "sort", "description": "sort into a file",
         "arguments": {"out": {"type": "string"}, "file": {"type": "string"}},
         "required": ["out", "file"],
         "argv": ["sort", "-o{out}", "--", "{file}"]},
    ]))
    .expect("loads");
    let refused = |tool: &str, arguments: Value| refused_call(&tools, tool, &arguments);
    let error = refused(
        "versioned",
        json!({"name": "", "ver": "-files0-from=/etc/shadow"}),
    );
    assert!(error.contains("as an option"), "{error}");
    let error = refused(
        "sort",
        json!({"out": "", "file": "--files0-from=/etc/shadow"}),
    );
    assert!(
        error.starts_with("out:") && error.contains("must not be empty"),
        "{error}"
    );
    let error = parse(&json!([
        {"name": "sort", "description": "sort",
         "arguments": {"out": {"type": "string"}, "file": {"type": "string"}},
         "required": ["file"],
         "argv": ["sort", "-o", "{out}", "{file}"]},
    ]))
    .expect_err("{out} left out shifts {file} into -o");
    assert!(error.contains("right after the option \"-o\""), "{error}");
}
