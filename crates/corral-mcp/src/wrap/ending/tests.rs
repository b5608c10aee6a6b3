use super::*;

const EXITED_1: Outcome = Outcome::Exited { code: 1 };

#[test]
fn only_the_server_side_endings_are_by_the_server() {
    for (ending, by_server) in [
        (Ending::ClientClosed, false),
        (Ending::ClientGone, false),
        (Ending::Interrupted, false),
        (Ending::ServerExited, true),
        (Ending::ServerClosedOutput, true),
        (Ending::ServerClosedInput, true),
    ] {
        assert_eq!(ending.by_server(), by_server, "{ending:?}");
    }
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
