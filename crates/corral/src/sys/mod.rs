//! The operating-system layer: the only module with syscalls and `unsafe`.
//!
//! Like tokio's `process::imp`, one implementation per platform exposes the
//! same functions; the rest of the crate never sees `libc`. Only Linux is
//! implemented today (see `docs/guarantees.md` for the plan elsewhere).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::*;
