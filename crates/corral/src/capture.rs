//! Standard output and error, read while the command runs and kept after it
//! is killed.
//!
//! Each captured stream is read by its own task into a shared buffer, so what
//! was read before a kill or a detach is never lost. Reading never decides
//! when the call ends: the supervisor waits for end-of-file only for a short
//! bound after the tree is gone (every writer is dead by then), then takes
//! whatever was read.

use std::sync::{Arc, Mutex};

use tokio::{io::AsyncReadExt, sync::watch, task::JoinHandle};

/// Output kept from one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Captured {
    /// The bytes, up to the capture limit.
    pub bytes: Vec<u8>,
    /// Bytes read past the capture limit and dropped.
    pub dropped: u64,
    /// Whether end-of-file was reached (false if the reader was detached, e.g.
    /// a released process still holds the pipe).
    pub complete: bool,
}

impl Captured {
    /// The bytes as text, lossily.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// A live view of a captured stream while the command runs: what was read so
/// far, and a way to wait for more. Get one with
/// [`Child::stdout_tap`](crate::Child::stdout_tap).
#[derive(Debug, Clone)]
pub struct OutputTap {
    buffer: Arc<Mutex<Captured>>,
    progress: watch::Receiver<u64>,
}

impl OutputTap {
    /// A copy of the bytes captured so far.
    pub fn snapshot(&self) -> Vec<u8> {
        lock(&self.buffer).bytes.clone()
    }

    /// Waits until the captured bytes satisfy `predicate` (true), or the
    /// stream ends without them doing so (false).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is consumed; the captured bytes stay in place.
    pub async fn wait_for(&mut self, mut predicate: impl FnMut(&[u8]) -> bool) -> bool {
        loop {
            if predicate(&lock(&self.buffer).bytes) {
                return true;
            }
            if self.progress.changed().await.is_err() {
                return predicate(&lock(&self.buffer).bytes);
            }
        }
    }
}

/// A stream being read in the background.
#[derive(Debug)]
pub(crate) struct Reader {
    buffer: Arc<Mutex<Captured>>,
    progress: watch::Receiver<u64>,
    task: JoinHandle<()>,
}

impl Reader {
    /// Starts reading `stream`, keeping at most `limit` bytes.
    pub(crate) fn start<R>(mut stream: R, limit: usize) -> Self
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
    {
        let buffer = Arc::new(Mutex::new(Captured::default()));
        let shared = Arc::clone(&buffer);
        let (progress_tx, progress) = watch::channel(0u64);
        let task = tokio::spawn(async move {
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                match stream.read(&mut chunk).await {
                    Ok(0) => {
                        lock(&shared).complete = true;
                        return;
                    }
                    Ok(n) => {
                        let mut kept = lock(&shared);
                        let room = limit.saturating_sub(kept.bytes.len()).min(n);
                        kept.bytes.extend_from_slice(&chunk[..room]);
                        kept.dropped += (n - room) as u64;
                        drop(kept);
                        progress_tx.send_modify(|total| *total += n as u64);
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(error) => {
                        tracing::debug!(%error, "output stream read failed");
                        return;
                    }
                }
            }
        });
        Self {
            buffer,
            progress,
            task,
        }
    }

    /// A live view of this stream.
    pub(crate) fn tap(&self) -> OutputTap {
        OutputTap {
            buffer: Arc::clone(&self.buffer),
            progress: self.progress.clone(),
        }
    }

    /// Waits for end-of-file until `deadline`, then detaches and returns what
    /// was read.
    pub(crate) async fn finish(mut self, deadline: tokio::time::Instant) -> Captured {
        if tokio::time::timeout_at(deadline, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
        std::mem::take(&mut *lock(&self.buffer))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(buffer: &Mutex<Captured>) -> std::sync::MutexGuard<'_, Captured> {
    buffer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn keeps_up_to_limit_and_counts_the_rest() {
        let (mut tx, rx) = tokio::io::duplex(1024);
        let reader = Reader::start(rx, 10);
        tx.write_all(b"0123456789abcdef").await.expect("write");
        drop(tx);
        let kept = reader
            .finish(tokio::time::Instant::now() + Duration::from_secs(5))
            .await;
        assert_eq!(kept.bytes, b"0123456789");
        assert_eq!(kept.dropped, 6);
        assert!(kept.complete);
    }

    #[tokio::test]
    async fn detaches_from_a_pipe_still_held_open_keeping_what_was_read() {
        let (mut tx, rx) = tokio::io::duplex(1024);
        let reader = Reader::start(rx, 1 << 20);
        tx.write_all(b"partial").await.expect("write");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let kept = reader
            .finish(tokio::time::Instant::now() + Duration::from_millis(50))
            .await;
        assert_eq!(kept.bytes, b"partial");
        assert!(!kept.complete);
        drop(tx);
    }

    #[tokio::test]
    async fn tap_sees_output_while_it_arrives() {
        let (mut tx, rx) = tokio::io::duplex(1024);
        let reader = Reader::start(rx, 1 << 20);
        let mut tap = reader.tap();
        let writer = tokio::spawn(async move {
            tx.write_all(b"ready 1 2").await.expect("write");
            tokio::time::sleep(Duration::from_millis(10)).await;
            tx.write_all(b"\nmore").await.expect("write");
            tx
        });
        assert!(tap.wait_for(|b| b.contains(&b'\n')).await);
        assert!(tap.snapshot().starts_with(b"ready 1 2\n"));
        drop(writer.await.expect("writer"));
        assert!(
            !tap.wait_for(|b| b.ends_with(b"never")).await,
            "ends at end-of-file"
        );
    }
}
