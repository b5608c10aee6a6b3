use super::*;

fn listed(code: &str) -> bool {
    TABLE.iter().any(|&(c, _)| c == code)
}

const EXITED_1: Outcome = Outcome::Exited { code: 1 };

#[test]
fn client_closed_is_0_whatever_the_server_did() {
    for ending in [Ending::ClientClosed, Ending::ClientGone] {
        for (outcome, leader) in [
            (Outcome::Exited { code: 0 }, Some(Exit::Code(0))),
            (EXITED_1, Some(Exit::Code(1))),
            (Outcome::Cancelled, Some(Exit::Signal(Signal::KILL))),
        ] {
            let status = ExitStatus::of(ending, None, outcome, leader);
            assert_eq!(status, ExitStatus::ClientClosed);
            assert_eq!(status.code(), 0);
        }
    }
    assert!(listed("0"));
}

#[test]
fn a_server_that_exits_by_itself_gives_its_status() {
    for ending in [
        Ending::ServerExited,
        Ending::ServerClosedOutput,
        Ending::ServerClosedInput,
    ] {
        let status = ExitStatus::of(
            ending,
            None,
            Outcome::Exited { code: 3 },
            Some(Exit::Code(3)),
        );
        assert_eq!(status, ExitStatus::ServerExited(3));
        assert_eq!(status.code(), 3);
    }
    let zero = ExitStatus::of(
        Ending::ServerExited,
        None,
        Outcome::Exited { code: 0 },
        None,
    );
    assert_eq!(zero.code(), 0);
    assert!(listed("N"));
}

#[test]
fn a_server_killed_by_a_signal_gives_128_plus_n() {
    let outcome = Outcome::Signaled {
        signal: Signal::KILL,
    };
    let status = ExitStatus::of(Ending::ServerExited, None, outcome, None);
    assert_eq!(status, ExitStatus::ServerSignaled(Signal::KILL));
    assert_eq!(status.code(), 137);
    assert!(listed("128+N"));
}

#[test]
fn a_server_that_closed_its_output_and_was_stopped_gives_how_it_died() {
    let stopped =
        |leader| ExitStatus::of(Ending::ServerClosedOutput, None, Outcome::Cancelled, leader);
    assert_eq!(stopped(Some(Exit::Signal(Signal::TERM))).code(), 143);
    assert_eq!(stopped(Some(Exit::Code(4))).code(), 4);
    assert_eq!(stopped(None), ExitStatus::Failed);
}

#[test]
fn a_signal_to_the_relay_gives_128_plus_n() {
    for (signal, code) in [(Signal::HUP, 129), (Signal::INT, 130), (Signal::TERM, 143)] {
        let status = ExitStatus::of(Ending::Interrupted, Some(signal), EXITED_1, None);
        assert_eq!(status, ExitStatus::Interrupted(signal));
        assert_eq!(status.code(), code);
    }
    assert!(listed("128+N"));
}

#[test]
fn failures_are_125_126_127() {
    assert_eq!(ExitStatus::Failed.code(), 125);
    assert_eq!(ExitStatus::CannotInvoke.code(), 126);
    assert_eq!(ExitStatus::NotFound.code(), 127);
    let negative = ExitStatus::of(
        Ending::ServerExited,
        None,
        Outcome::Exited { code: -1 },
        None,
    );
    assert_eq!(negative, ExitStatus::Failed);
    for code in ["125", "126", "127"] {
        assert!(listed(code), "{code}");
    }
}

#[test]
fn errors_map_to_their_rows() {
    assert_eq!(crate::Error::NoCommand.exit_status().code(), 125);
    assert_eq!(crate::Error::ParentGone.exit_status().code(), 143);
}

#[test]
fn unanswered_messages_name_the_cause() {
    let message = |ending, received, outcome| unanswered_message(ending, received, outcome);
    assert_eq!(
        message(Ending::ServerExited, None, EXITED_1),
        "MCP server exited with status 1 before answering"
    );
    assert_eq!(
        message(
            Ending::ServerClosedOutput,
            None,
            Outcome::Signaled {
                signal: Signal::KILL
            }
        ),
        "MCP server was killed by signal 9 (SIGKILL) before answering"
    );
    assert!(
        message(Ending::ServerClosedOutput, None, Outcome::Cancelled).contains("stopped by corral")
    );
    assert!(message(Ending::Interrupted, Some(Signal::INT), Outcome::Cancelled).contains("SIGINT"));
    assert!(message(Ending::ClientClosed, None, Outcome::Cancelled).contains("client closed"));
}
