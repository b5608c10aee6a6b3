use super::*;

fn store(max: usize) -> TaskStore {
    TaskStore::new(Duration::from_secs(60), max, Duration::from_millis(500))
}

fn make(store: &TaskStore, id: &str, owner: &Principal) -> (CancellationToken, Latest) {
    let cancel = CancellationToken::new();
    let latest = Latest::default();
    store
        .create(
            id.into(),
            owner,
            cancel.clone(),
            latest.clone(),
            Duration::from_secs(10),
        )
        .expect("made");
    (cancel, latest)
}

#[test]
fn a_task_is_working_with_its_latest_lines_then_completed_with_its_result() {
    let store = store(4);
    let me = Principal::new("me");
    let (_, latest) = make(&store, "task-1", &me);
    let task = store.get(&me, "task-1").expect("mine");
    assert_eq!(task.status(), TaskStatus::Working);
    assert_eq!(
        task.task.ttl_ms,
        Some(70_000),
        "the run's bound and the TTL"
    );
    *lock(&latest) = Some("line 7".into());
    let task = store.get(&me, "task-1").expect("mine");
    assert_eq!(task.task.status_message.as_deref(), Some("line 7"));
    store.finish(
        "task-1",
        End::Result(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text("exited 0"),
        ])),
    );
    let task = store.get(&me, "task-1").expect("mine");
    assert_eq!(task.status(), TaskStatus::Completed);
    let TaskPayload::Completed { result } = &task.payload else {
        panic!("{task:?}")
    };
    assert_eq!(result["content"][0]["text"], "exited 0");
}

#[test]
fn another_principal_is_told_the_task_is_unknown_and_cannot_cancel_it() {
    let store = store(4);
    let (cancel, _) = make(&store, "task-1", &Principal::new("alice"));
    let mallory = Principal::new("mallory");
    let theirs = store.get(&mallory, "task-1").expect_err("not theirs");
    let never = store.get(&mallory, "task-2").expect_err("never existed");
    assert_eq!(theirs.code, never.code);
    assert!(store.cancel(&mallory, "task-1").is_err());
    assert!(store.update(&mallory, "task-1").is_err());
    assert!(!cancel.is_cancelled(), "another principal ended the run");
    store
        .cancel(&Principal::new("alice"), "task-1")
        .expect("the owner cancels");
    assert!(cancel.is_cancelled());
}

#[test]
fn a_cancelled_run_ends_cancelled_with_what_is_known() {
    let store = store(4);
    let me = Principal::default();
    make(&store, "task-1", &me);
    store.finish(
        "task-1",
        End::Cancelled("cancelled; effects unknown".into()),
    );
    let task = store.get(&me, "task-1").expect("mine");
    assert_eq!(task.status(), TaskStatus::Cancelled);
    assert_eq!(
        task.task.status_message.as_deref(),
        Some("cancelled; effects unknown")
    );
}

#[test]
fn a_full_store_drops_its_oldest_finished_task_and_refuses_when_all_run() {
    let store = store(2);
    let me = Principal::default();
    make(&store, "task-1", &me);
    make(&store, "task-2", &me);
    assert!(
        store
            .create(
                "task-3".into(),
                &me,
                CancellationToken::new(),
                Latest::default(),
                Duration::ZERO
            )
            .is_err(),
        "two running tasks fill a store of two"
    );
    store.finish("task-2", End::Cancelled(String::new()));
    make(&store, "task-3", &me);
    assert!(store.get(&me, "task-2").is_err(), "the finished one went");
    assert!(store.get(&me, "task-1").is_ok(), "a running one stays");
}

#[test]
fn a_finished_task_is_dropped_after_its_ttl() {
    let store = TaskStore::new(Duration::ZERO, 4, Duration::from_millis(500));
    let me = Principal::default();
    make(&store, "task-1", &me);
    assert!(store.get(&me, "task-1").is_ok(), "running: kept");
    store.finish("task-1", End::Cancelled(String::new()));
    assert!(store.get(&me, "task-1").is_err(), "finished, TTL 0: gone");
}

fn try_make(store: &TaskStore, id: &str, owner: &Principal) -> Result<Task, String> {
    store.create(
        id.into(),
        owner,
        CancellationToken::new(),
        Latest::default(),
        Duration::from_secs(10),
    )
}

#[test]
fn one_client_starting_many_runs_never_pushes_out_anothers_result() {
    let store = store(4);
    let (alice, mallory) = (Principal::new("alice"), Principal::new("mallory"));
    make(&store, "alice-1", &alice);
    store.finish("alice-1", End::Cancelled(String::new()));
    for n in 1..=3 {
        make(&store, &format!("mallory-{n}"), &mallory);
    }
    // Full: mallory's finished ones go first, however old alice's is.
    store.finish("mallory-1", End::Cancelled(String::new()));
    make(&store, "mallory-4", &mallory);
    assert!(store.get(&mallory, "mallory-1").is_err(), "her own went");
    assert!(store.get(&alice, "alice-1").is_ok(), "alice's result stays");
    // Full again, none of mallory's finished: alice's result does not go.
    let refused = try_make(&store, "mallory-5", &mallory).expect_err("no fair room");
    assert!(refused.contains("--max-tasks"), "{refused}");
    assert!(store.get(&alice, "alice-1").is_ok(), "alice's result stays");
}

#[test]
fn a_client_holding_more_than_the_creator_gives_up_its_oldest_finished_task() {
    let store = store(4);
    let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
    for n in 1..=4 {
        make(&store, &format!("bob-{n}"), &bob);
    }
    store.finish("bob-3", End::Cancelled(String::new()));
    store.finish("bob-2", End::Cancelled(String::new()));
    make(&store, "alice-1", &alice);
    assert!(
        store.get(&bob, "bob-3").is_err(),
        "bob's oldest finished went"
    );
    assert!(store.get(&bob, "bob-2").is_ok(), "only one went");
    // Bob holds 3, alice 1: a second of alice's (she will hold 2) takes
    // bob-2 (he keeps 2); a third (3 against his 2) finds no fair room.
    make(&store, "alice-2", &alice);
    assert!(store.get(&bob, "bob-2").is_err());
    assert!(
        try_make(&store, "alice-3", &alice).is_err(),
        "bob holds no more than she would"
    );
}
