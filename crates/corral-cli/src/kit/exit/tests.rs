//! One test per row of each table, plus the mappings that lead to it.

use super::*;

fn listed(table: &Table, code: &str) -> bool {
    table.rows.iter().any(|&(c, _)| c == code)
}

const EXITED_1: Outcome = Outcome::Exited { code: 1 };

// `corral run`.

#[test]
fn as_timeout_a_forced_kill_after_a_timeout_is_137() {
    let kill = Some(Exit::Signal(Signal::KILL));
    assert_eq!(Status::TimedOut.as_gnu(kill).code(), 137);
    assert_eq!(
        Status::TimedOut
            .as_gnu(Some(Exit::Signal(Signal::TERM)))
            .code(),
        124
    );
    assert_eq!(Status::TimedOut.as_gnu(None).code(), 124);
    // Not a timeout: the command's own death stays what it was.
    assert_eq!(Status::Exited(3).as_gnu(kill), Status::Exited(3));
    assert_eq!(Status::Signaled(Signal::KILL).as_gnu(kill).code(), 137);
}

#[test]
fn as_timeout_a_received_signal_gives_the_commands_own_status() {
    let interrupted = Status::Interrupted(Signal::TERM);
    assert_eq!(interrupted.as_gnu(Some(Exit::Code(0))), Status::Exited(0));
    assert_eq!(
        interrupted.as_gnu(Some(Exit::Signal(Signal::KILL))).code(),
        137
    );
    assert_eq!(
        interrupted.as_gnu(Some(Exit::Signal(Signal::TERM))).code(),
        143
    );
    // Not reaped (stuck past the final bound): the signal received.
    assert_eq!(interrupted.as_gnu(None), interrupted);
}

#[test]
fn run_exited_is_the_commands_own_code() {
    assert_eq!(Status::Exited(0).code(), 0);
    assert_eq!(Status::Exited(3).code(), 3);
    assert_eq!(Status::Exited(255).code(), 255);
    let run = Status::of_run(Outcome::Exited { code: 3 }, None, false, None);
    assert_eq!(run, Status::Exited(3));
    assert!(listed(&RUN, "N"));
}

#[test]
fn run_timed_out_is_124_whatever_the_leader_died_of() {
    assert_eq!(Status::TimedOut.code(), 124);
    for leader in [
        None,
        Some(Exit::Signal(Signal::TERM)),
        Some(Exit::Signal(Signal::KILL)),
        Some(Exit::Code(0)),
    ] {
        let run = Status::of_run(Outcome::TimedOut, leader, false, None);
        assert_eq!(run, Status::TimedOut, "{leader:?}");
    }
    assert!(listed(&RUN, "124"));
}

#[test]
fn run_failed_is_125() {
    assert_eq!(Status::Failed.code(), 125);
    let unreaped = Status::of_run(Outcome::Exited { code: -1 }, None, false, None);
    assert_eq!(unreaped, Status::Failed);
    assert!(listed(&RUN, "125"));
}

#[test]
fn run_cannot_invoke_is_126() {
    assert_eq!(Status::CannotInvoke.code(), 126);
    assert!(listed(&RUN, "126"));
}

#[test]
fn run_not_found_is_127() {
    assert_eq!(Status::NotFound.code(), 127);
    assert!(listed(&RUN, "127"));
}

#[test]
fn run_signaled_is_128_plus_n() {
    assert_eq!(Status::Signaled(Signal::KILL).code(), 137);
    assert_eq!(Status::Signaled(Signal::USR1).code(), 138);
    let run = Status::of_run(
        Outcome::Signaled {
            signal: Signal::USR1,
        },
        None,
        false,
        None,
    );
    assert_eq!(run, Status::Signaled(Signal::USR1));
    assert!(listed(&RUN, "128+N"));
}

#[test]
fn run_interrupted_is_128_plus_the_received_signal() {
    for (signal, code) in [
        (Signal::HUP, 129),
        (Signal::INT, 130),
        (Signal::QUIT, 131),
        (Signal::TERM, 143),
    ] {
        assert_eq!(Status::Interrupted(signal).code(), code);
        let run = Status::of_run(Outcome::Cancelled, None, false, Some(signal));
        assert_eq!(run, Status::Interrupted(signal));
        // --preserve-status does not change it.
        let run = Status::of_run(Outcome::Cancelled, None, true, Some(signal));
        assert_eq!(run, Status::Interrupted(signal));
    }
    assert!(listed(&RUN, "128+N"));
}

#[test]
fn run_preserve_status_reports_the_leader_after_a_timeout() {
    let run = |leader| Status::of_run(Outcome::TimedOut, leader, true, None);
    assert_eq!(run(Some(Exit::Code(7))), Status::Exited(7));
    assert_eq!(
        run(Some(Exit::Signal(Signal::TERM))),
        Status::Signaled(Signal::TERM)
    );
    assert_eq!(run(Some(Exit::Signal(Signal::KILL))).code(), 137);
    assert_eq!(run(None), Status::TimedOut);
}

// `corral mcp wrap`.

#[test]
fn wrap_client_closed_is_0_whatever_the_server_did() {
    for ending in [Ending::ClientClosed, Ending::ClientGone] {
        for (outcome, leader) in [
            (Outcome::Exited { code: 0 }, Some(Exit::Code(0))),
            (EXITED_1, Some(Exit::Code(1))),
            (Outcome::Cancelled, Some(Exit::Signal(Signal::KILL))),
        ] {
            let status = Status::of_wrap(ending, None, outcome, leader);
            assert_eq!(status, Status::Exited(0));
            assert_eq!(status.code(), 0);
        }
    }
    assert!(listed(&WRAP, "0"));
}

#[test]
fn wrap_a_server_that_exits_by_itself_gives_its_status() {
    for ending in [
        Ending::ServerExited,
        Ending::ServerClosedOutput,
        Ending::ServerClosedInput,
    ] {
        let status = Status::of_wrap(
            ending,
            None,
            Outcome::Exited { code: 3 },
            Some(Exit::Code(3)),
        );
        assert_eq!(status, Status::Exited(3));
        assert_eq!(status.code(), 3);
    }
    let zero = Status::of_wrap(
        Ending::ServerExited,
        None,
        Outcome::Exited { code: 0 },
        None,
    );
    assert_eq!(zero.code(), 0);
    assert!(listed(&WRAP, "N"));
}

#[test]
fn wrap_a_server_killed_by_a_signal_gives_128_plus_n() {
    let outcome = Outcome::Signaled {
        signal: Signal::KILL,
    };
    let status = Status::of_wrap(Ending::ServerExited, None, outcome, None);
    assert_eq!(status, Status::Signaled(Signal::KILL));
    assert_eq!(status.code(), 137);
    assert!(listed(&WRAP, "128+N"));
}

#[test]
fn wrap_a_server_that_closed_its_output_and_was_stopped_gives_how_it_died() {
    let stopped =
        |leader| Status::of_wrap(Ending::ServerClosedOutput, None, Outcome::Cancelled, leader);
    assert_eq!(stopped(Some(Exit::Signal(Signal::TERM))).code(), 143);
    assert_eq!(stopped(Some(Exit::Code(4))).code(), 4);
    assert_eq!(stopped(None), Status::Failed);
}

#[test]
fn wrap_a_signal_to_the_relay_gives_128_plus_n() {
    for (signal, code) in [(Signal::HUP, 129), (Signal::INT, 130), (Signal::TERM, 143)] {
        let status = Status::of_wrap(Ending::Interrupted, Some(signal), EXITED_1, None);
        assert_eq!(status, Status::Interrupted(signal));
        assert_eq!(status.code(), code);
    }
    assert!(listed(&WRAP, "128+N"));
}

#[test]
fn wrap_failures_are_125_126_127() {
    assert_eq!(Status::Failed.code(), 125);
    assert_eq!(Status::CannotInvoke.code(), 126);
    assert_eq!(Status::NotFound.code(), 127);
    let negative = Status::of_wrap(
        Ending::ServerExited,
        None,
        Outcome::Exited { code: -1 },
        None,
    );
    assert_eq!(negative, Status::Failed);
    for code in ["125", "126", "127"] {
        assert!(listed(&WRAP, code), "{code}");
    }
}

// `corral mcp call` and `corral mcp list`.

#[test]
fn call_ok_is_0() {
    assert_eq!(Status::of_call(CallOutcome::Ok).code(), 0);
    assert!(listed(&CALL, "0"));
    assert!(listed(&LIST, "0"));
}

#[test]
fn call_a_tool_error_or_an_error_answer_is_1() {
    assert_eq!(Status::of_call(CallOutcome::ToolError).code(), 1);
    assert_eq!(Status::of_call(CallOutcome::Error).code(), 1);
    assert!(listed(&CALL, "1"));
    assert!(listed(&LIST, "1"));
}

#[test]
fn call_an_unknown_outcome_is_124() {
    assert_eq!(Status::of_call(CallOutcome::Unknown), Status::TimedOut);
    assert_eq!(Status::of_call(CallOutcome::Unknown).code(), 124);
    assert!(listed(&CALL, "124"));
    assert!(listed(&LIST, "124"));
}

#[test]
fn call_not_sent_is_125() {
    assert_eq!(Status::of_call(CallOutcome::NotSent), Status::Failed);
    assert_eq!(Status::of_call(CallOutcome::NotSent).code(), 125);
    assert!(listed(&CALL, "125"));
    assert!(listed(&LIST, "125"));
}

#[test]
fn call_outcomes_serialise_as_the_envelope_names_them() {
    for (outcome, name) in [
        (CallOutcome::Ok, "ok"),
        (CallOutcome::ToolError, "tool_error"),
        (CallOutcome::Error, "error"),
        (CallOutcome::Unknown, "unknown"),
        (CallOutcome::NotSent, "not_sent"),
    ] {
        let json = serde_json::to_value(outcome).expect("serialises");
        assert_eq!(json, name);
    }
}

// Both.

#[test]
fn spawn_errors_map_to_their_rows() {
    let spawn = |failure| Error::Spawn {
        program: "x".into(),
        failure,
        source: std::io::ErrorKind::NotFound.into(),
    };
    assert_eq!(
        Status::of_spawn_error(&spawn(SpawnFailure::NotFound)),
        Status::NotFound
    );
    assert_eq!(
        Status::of_spawn_error(&spawn(SpawnFailure::NotExecutable)),
        Status::CannotInvoke
    );
    assert_eq!(
        Status::of_spawn_error(&spawn(SpawnFailure::Other)),
        Status::Failed
    );
}

#[test]
fn help_lists_every_row_once_under_its_title() {
    for table in [&RUN, &WRAP, &CALL, &LIST] {
        let help = table.help();
        assert!(help.starts_with(table.title), "{help}");
        assert_eq!(help.lines().count(), table.rows.len() + 1, "{help}");
        for (code, meaning) in table.rows {
            let line = format!("  {code:<6} {meaning}");
            assert!(help.lines().any(|l| l == line), "{code}: {help}");
        }
    }
}

#[test]
fn serve_stopped_is_0_and_failed_is_125() {
    assert_eq!(Status::Exited(0).code(), 0);
    assert!(listed(&SERVE, "0"));
    assert_eq!(Status::Failed.code(), 125);
    assert!(listed(&SERVE, "125"));
}

#[test]
fn a_tree_a_limit_ended_exits_137_152_or_with_its_own_status() {
    let limited =
        |limit, leader| Status::of_run(Outcome::LimitExceeded { limit }, leader, false, None);
    let term = Some(Exit::Signal(Signal::TERM));
    assert_eq!(
        limited(Limit::Memory, Some(Exit::Signal(Signal::KILL))).code(),
        137
    );
    assert_eq!(limited(Limit::CpuTime, term).code(), 152);
    assert_eq!(limited(Limit::Processes, Some(Exit::Code(1))).code(), 1);
    assert_eq!(limited(Limit::Processes, term).code(), 143);
    assert_eq!(limited(Limit::Processes, None), Status::Failed);
    assert!(listed(&RUN, "137") && listed(&RUN, "152"));
    // A wrapped server a limit ended: the same statuses.
    let wrapped = |limit, leader| {
        Status::of_wrap(
            Ending::ServerExited,
            None,
            Outcome::LimitExceeded { limit },
            leader,
        )
    };
    assert_eq!(wrapped(Limit::CpuTime, term).code(), 152);
    assert_eq!(
        wrapped(Limit::Memory, Some(Exit::Signal(Signal::KILL))).code(),
        137
    );
}
