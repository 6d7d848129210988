//! Giving memory back once the agent is idle: glibc's malloc keeps the heap
//! pages freed after a large list (the pages of full objects, now reduced to
//! summaries); `malloc_trim` hands them back to the kernel, so RSS does not
//! follow the size of the Node objects.

/// Hands the freed heap pages back to the kernel (after start-up and after each list).
pub fn release_idle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
    tracing::debug!("released idle memory");
}
