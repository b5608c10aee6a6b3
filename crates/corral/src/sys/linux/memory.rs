//! The C allocator's settings.

/// `mallopt(M_MMAP_THRESHOLD, bytes)`: every block of at least `bytes` is
/// its own mapping, unmapped when freed, and glibc's dynamic threshold is
/// off. Whether the allocator took it (`false` with another C library).
///
/// # References
/// - <https://man7.org/linux/man-pages/man3/mallopt.3.html>
#[cfg(target_env = "gnu")]
pub(crate) fn fixed_mmap_threshold(bytes: usize) -> bool {
    let Ok(bytes) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: `mallopt` takes two integers and changes only the
    // allocator's settings, which it synchronises itself.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
}

/// Without glibc: not available.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn fixed_mmap_threshold(_bytes: usize) -> bool {
    false
}
