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
