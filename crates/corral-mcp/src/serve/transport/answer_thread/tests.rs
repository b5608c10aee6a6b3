//! The answer thread against bodies that take their time: one whose
//! building holds its thread, one that never yields a frame; and the hold
//! it lets go of.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex, mpsc as std_mpsc},
    time::Duration,
};

use super::*;
use crate::serve::transport::answers::{Backlog, Unwritten};

/// How long a build waits to be released before it gives up (the test has
/// failed by then).
const LATE: Duration = Duration::from_secs(10);

/// A streamed answer (its size unknown) whose one frame is built in a poll
/// that holds its thread until released: `released`, or `late` after
/// [`LATE`].
struct Slow {
    release: Mutex<std_mpsc::Receiver<()>>,
    done: bool,
}

impl Body for Slow {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.done {
            return Poll::Ready(None);
        }
        self.done = true;
        let released = self
            .release
            .lock()
            .expect("the release")
            .recv_timeout(LATE)
            .is_ok();
        let text: &'static [u8] = if released { b"released" } else { b"late" };
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(text)))))
    }
}

/// A streamed answer that never yields a frame, and says when it is dropped.
struct Silent {
    dropped: Mutex<std_mpsc::Sender<()>>,
}

impl Body for Silent {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Pending
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        let _ = self.dropped.lock().expect("the sender").send(());
    }
}

fn counted(body: impl Body<Data = Bytes, Error = Infallible> + Send + Sync + 'static) -> Counted {
    Counted::new(
        body.boxed(),
        Arc::new(Unwritten::new(Arc::new(Backlog::new(1 << 20)))),
    )
}

#[tokio::test]
async fn a_slow_build_leaves_the_runtime_serving() {
    let thread = AnswerThread::start().expect("the answer thread");
    let (release, released) = std_mpsc::channel();
    let mut answer = thread.answer(
        counted(Slow {
            release: Mutex::new(released),
            done: false,
        }),
        AnswerHold::default(),
    );
    // A task of this current-thread runtime releases the build: it runs
    // only if building the answer left the runtime free.
    tokio::spawn(async move { release.send(()) });
    let frame = answer
        .frame()
        .await
        .expect("a frame")
        .expect("not dropped")
        .into_data()
        .expect("data");
    assert_eq!(
        frame, "released",
        "the build held the runtime's thread until it gave up"
    );
    assert!(answer.frame().await.is_none(), "the answer ended");
}

#[tokio::test]
async fn a_dropped_answer_drops_the_body_being_polled() {
    let thread = AnswerThread::start().expect("the answer thread");
    let (dropped, drops) = std_mpsc::channel();
    let answer = thread.answer(
        counted(Silent {
            dropped: Mutex::new(dropped),
        }),
        AnswerHold::default(),
    );
    drop(answer);
    let gone = tokio::task::spawn_blocking(move || drops.recv_timeout(LATE))
        .await
        .expect("the wait");
    assert!(gone.is_ok(), "the body was still held after {LATE:?}");
}

#[tokio::test]
async fn the_hold_is_let_go_once_a_frame_is_built() {
    let thread = AnswerThread::start().expect("the answer thread");
    let (release, released) = std_mpsc::channel();
    // The request keeps a clone of the hold, as rmcp does until the call
    // ends; what it holds stands for a run's permit.
    let hold = AnswerHold::default();
    let permit = Arc::new(());
    hold.keep(Arc::clone(&permit));
    let mut answer = thread.answer(
        counted(Slow {
            release: Mutex::new(released),
            done: false,
        }),
        hold.clone(),
    );
    assert_eq!(
        Arc::strong_count(&permit),
        2,
        "let go before the answer was built"
    );
    release.send(()).expect("the release");
    answer.frame().await.expect("a frame").expect("not dropped");
    assert_eq!(
        Arc::strong_count(&permit),
        1,
        "still held once a frame of the answer was built"
    );
}
