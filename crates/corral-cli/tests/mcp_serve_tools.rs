//! `corral mcp serve --tools FILE` at start-up: the tools file is code the
//! server runs, so one another user could have written (writable by group
//! or others, in such a directory, or owned by another user under root) is
//! refused before anything is served, naming the fix; a broken one is
//! refused naming the file, the place (JSON line and column) or the tool,
//! and the rule. The same file, made safe, is served (the stdio client
//! leaves at once: exit 0). What the tools do is tested through the
//! library's server (corral-tests, tests/mcp_serve/command_tools.rs).

mod mcp_common;

use std::{
    os::unix::fs::PermissionsExt as _,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use corral_tests::{Owned, Scratch, wait_until};
use mcp_common::wrapper;

/// A tools file with one good tool.
const GOOD: &str = r#"{"version": 1, "tools": [
  {"name": "greet", "description": "Say hello.",
   "arguments": {"name": {"type": "string"}}, "required": ["name"],
   "argv": ["printf", "Hello, %s!", "{name}"]}
]}"#;

/// `corral mcp serve ARGS` over stdio with no client (standard input
/// empty): its exit status and standard error (kept in `scratch`), within
/// 30 s.
fn serve(scratch: &Scratch, args: &[&str]) -> (Option<i32>, String) {
    let stderr_file = scratch.path("stderr");
    let mut child = Owned(
        Command::new(wrapper())
            .args(["mcp", "serve"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_file).expect("stderr file"))
            .spawn()
            .expect("starting corral mcp serve"),
    );
    let mut status = None;
    wait_until(Duration::from_secs(30), || {
        status = child.try_wait().expect("try_wait");
        status.is_some()
    });
    let stderr = std::fs::read_to_string(&stderr_file).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("serve {args:?} still runs: {stderr}"));
    (status.code(), stderr)
}

/// `text` written to `path` with `mode`.
fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).expect("write the tools file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn tools_arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// The refusal of `--tools path` at start: exit 125 and its standard
/// error, which names the file.
fn refused(scratch: &Scratch, path: &Path, more: &[&str]) -> String {
    let mut args = vec!["--tools", tools_arg(path)];
    args.extend(more);
    let (code, stderr) = serve(scratch, &args);
    assert_eq!(code, Some(125), "{stderr}");
    assert!(
        stderr.contains(&format!("--tools {}", path.display())),
        "the file is not named: {stderr}"
    );
    stderr
}

#[test]
fn a_safe_tools_file_is_served() {
    let scratch = Scratch::new("serve-tools-good");
    let file = scratch.path("tools.json");
    write(&file, GOOD, 0o644);
    let (code, stderr) = serve(&scratch, &["--tools", tools_arg(&file)]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = serve(&scratch, &["--tools", tools_arg(&file), "--tools-only"]);
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn a_tools_file_others_can_write_is_refused_naming_the_fix() {
    let scratch = Scratch::new("serve-tools-writable");
    let file = scratch.path("tools.json");
    for mode in [0o666, 0o664, 0o646] {
        write(&file, GOOD, mode);
        let stderr = refused(&scratch, &file, &[]);
        assert!(
            stderr.contains("writable by group or others") && stderr.contains("chmod go-w"),
            "{mode:o}: {stderr}"
        );
    }
    // In a directory others can write (without the sticky bit): they could
    // replace it.
    write(&file, GOOD, 0o644);
    std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("without the sticky bit"), "{stderr}");
}

/// Under root, a file another user owns (it could have written it) is
/// refused, whatever its mode.
#[test]
fn a_tools_file_another_user_owns_is_refused_by_a_root_server() {
    if !corral_tests::is_root() {
        corral_tests::skipped("a file of another user needs root to make");
        return;
    }
    let scratch = Scratch::new("serve-tools-foreign");
    let file = scratch.path("tools.json");
    write(&file, GOOD, 0o644);
    std::os::unix::fs::chown(&file, Some(65534), Some(65534)).expect("chown nobody");
    let stderr = refused(&scratch, &file, &[]);
    for part in ["owned by nobody (uid 65534)", "chown root"] {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }
}

#[test]
fn a_broken_tools_file_is_refused_naming_the_place_and_the_rule() {
    let scratch = Scratch::new("serve-tools-broken");
    let file = scratch.path("tools.json");
    write(&file, "{\"tools\": [\n  {\"name\": \"greet\",,\n]}", 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("line 2 column"), "{stderr}");

    write(&file, &GOOD.replace("{name}\"]", "{nmae}\"]"), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    for part in [
        "tools[0] (\"greet\")",
        "the placeholder {nmae} names no argument",
    ] {
        assert!(stderr.contains(part), "no {part:?} in: {stderr}");
    }

    // A generic tool's name, unless only the file's tools are offered.
    write(&file, &GOOD.replace("\"greet\"", "\"run\""), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(
        stderr.contains("the name of a generic tool") && stderr.contains("--tools-only"),
        "{stderr}"
    );
    let (code, stderr) = serve(&scratch, &["--tools", tools_arg(&file), "--tools-only"]);
    assert_eq!(code, Some(0), "{stderr}");

    // A timeout above the server's maximum.
    write(
        &file,
        &GOOD.replace("\"argv\"", "\"timeout\": \"2h\", \"argv\""),
        0o644,
    );
    let stderr = refused(&scratch, &file, &["--max-timeout", "1h"]);
    assert!(stderr.contains("--max-timeout"), "{stderr}");

    // --tools-only without --tools.
    let (code, stderr) = serve(&scratch, &["--tools-only"]);
    assert_eq!(code, Some(125), "{stderr}");
    assert!(stderr.contains("--tools"), "{stderr}");
}

/// A tools file whose one tool runs `program` (with `env`, a JSON object).
fn running(program: &str, env: &str) -> String {
    format!(
        r#"{{"version": 1, "tools": [{{"name": "go", "description": "Run it.",
             "argv": [{program:?}], "env": {env}}}]}}"#
    )
}

/// The program a tool runs is code the server runs, as the file is: one
/// another user can change (writable by group or others, in a directory
/// they can change, reached through a link in one, found first along a
/// `PATH` through one, or owned by another user under root) is refused at
/// start, naming it and the fix; so is a relative path, found from the
/// run's directory. A program that does not exist, where only this user or
/// root could put it, is served (a call fails to start).
#[test]
fn a_program_another_user_can_change_is_refused() {
    let scratch = Scratch::new("serve-tools-program");
    let file = scratch.path("tools.json");
    let script = |dir: &Path, mode: u32| {
        std::fs::create_dir_all(dir).expect("mkdir");
        let path = dir.join("job.sh");
        std::fs::write(&path, "#!/bin/sh\necho ran\n").expect("write the program");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path.to_str().expect("UTF-8").to_owned()
    };
    let safe = script(&scratch.path("safe"), 0o755);
    write(&file, &running(&safe, "{}"), 0o644);
    let (code, stderr) = serve(&scratch, &["--tools", tools_arg(&file)]);
    assert_eq!(code, Some(0), "a safe program: {stderr}");
    // A second name for it (a hard link) changes nothing: a program is not a
    // secret, and no name can change what the checked mode protects.
    std::fs::hard_link(&safe, scratch.path("safe/other-name.sh")).expect("hard link");
    let (code, stderr) = serve(&scratch, &["--tools", tools_arg(&file)]);
    assert_eq!(code, Some(0), "a safe program with two names: {stderr}");

    let writable = script(&scratch.path("writable"), 0o757);
    write(&file, &running(&writable, "{}"), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(
        stderr.contains(&writable) && stderr.contains("chmod go-w"),
        "{stderr}"
    );

    let open = scratch.path("open");
    let in_open = script(&open, 0o755);
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    write(&file, &running(&in_open, "{}"), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("without the sticky bit"), "{stderr}");

    // A link in a safe directory to a program in the open one.
    let link = scratch.path("safe/link.sh");
    std::os::unix::fs::symlink(&in_open, &link).expect("symlink");
    write(&file, &running(link.to_str().expect("UTF-8"), "{}"), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("without the sticky bit"), "{stderr}");

    // A bare name found first in the open directory along the tool's PATH,
    // though a safe one comes later.
    let path = format!(
        r#"{{"PATH": "{}:{}"}}"#,
        open.display(),
        scratch.path("safe").display()
    );
    write(&file, &running("job.sh", &path), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("without the sticky bit"), "{stderr}");
    // ... and one searched in a relative PATH entry.
    write(
        &file,
        &running("job.sh", r#"{"PATH": "bin:/usr/bin"}"#),
        0o644,
    );
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("relative"), "{stderr}");

    write(&file, &running("./job.sh", "{}"), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("absolute path"), "{stderr}");

    // Each PATH entry is checked, not only up to the first file of that
    // name: which one runs depends on the run's user and execute bits.
    let path = format!(
        r#"{{"PATH": "{}:{}"}}"#,
        scratch.path("safe").display(),
        open.display()
    );
    write(&file, &running("job.sh", &path), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(
        stderr.contains("without the sticky bit") && stderr.contains("PATH"),
        "{stderr}"
    );

    // A script whose #! interpreter another user can change, directly or
    // through `env` along the PATH.
    let interpreted = scratch.path("safe/interpreted.sh");
    std::fs::write(&interpreted, format!("#!{in_open}\n")).expect("write");
    std::fs::set_permissions(&interpreted, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    write(
        &file,
        &running(interpreted.to_str().expect("UTF-8"), "{}"),
        0o644,
    );
    let stderr = refused(&scratch, &file, &[]);
    assert!(
        stderr.contains("#! interpreter") && stderr.contains("without the sticky bit"),
        "{stderr}"
    );
    std::fs::write(&interpreted, "#!/usr/bin/env job.sh\n").expect("write");
    let path = format!(r#"{{"PATH": "{}:/usr/bin"}}"#, open.display());
    write(
        &file,
        &running(interpreted.to_str().expect("UTF-8"), &path),
        0o644,
    );
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("without the sticky bit"), "{stderr}");

    // Not there yet, in a directory anyone may add to (sticky, as /tmp).
    let sticky = scratch.path("sticky");
    std::fs::create_dir(&sticky).expect("mkdir");
    std::fs::set_permissions(&sticky, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let later = sticky.join("later/job.sh");
    write(&file, &running(later.to_str().expect("UTF-8"), "{}"), 0o644);
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("may create it"), "{stderr}");
    write(
        &file,
        &running(sticky.join("job.sh").to_str().expect("UTF-8"), "{}"),
        0o644,
    );
    let stderr = refused(&scratch, &file, &[]);
    assert!(stderr.contains("may create it"), "{stderr}");

    let missing = scratch.path("safe/not-yet/job.sh");
    write(
        &file,
        &running(missing.to_str().expect("UTF-8"), "{}"),
        0o644,
    );
    let (code, stderr) = serve(&scratch, &["--tools", tools_arg(&file)]);
    assert_eq!(code, Some(0), "a missing program in a safe place: {stderr}");

    if corral_tests::is_root() {
        let foreign = script(&scratch.path("foreign"), 0o755);
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).expect("chown nobody");
        write(&file, &running(&foreign, "{}"), 0o644);
        let stderr = refused(&scratch, &file, &[]);
        assert!(
            stderr.contains("owned by nobody (uid 65534)") && stderr.contains("chown root"),
            "{stderr}"
        );
    } else {
        corral_tests::skipped("a program of another user needs root to make");
    }
}
