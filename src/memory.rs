//! Giving memory back once the agent is idle.
//!
//! Two kinds of pages stay resident after start-up for no use: heap pages that
//! glibc's malloc keeps after a large list was freed, and the pages of the
//! binary itself (argument parsing, TLS set-up, the list code) that start-up
//! ran once. The kernel maps the binary 16 pages at a time around each fault,
//! so most of a 3 MiB binary ends up in the process's RSS although an idle
//! placeholder runs a few pages of it. [`release_code_pages`] unmaps the
//! read-only pages of the executable (`MADV_DONTNEED`): they stay in the page
//! cache, shared and reclaimable, and come back on the next use as minor faults.
//! (A debugger's breakpoints in those pages are lost with them.)

/// Hands the heap pages freed after a list (the response and the full objects,
/// now reduced to summaries) back to the kernel: glibc's malloc would keep them,
/// and RSS would follow the size of the Node objects.
pub fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Both of the above, when the agent goes idle: after start-up and after each
/// list. Returns the bytes of code pages released.
pub fn release_idle() -> usize {
    release_freed_heap();
    let released = release_code_pages();
    tracing::debug!(code_kib = released / 1024, "released idle memory");
    released
}

/// Unmaps the pages of the executable's read-only segments (code and
/// constants) from this process; returns the bytes released. Writable
/// segments (data, bss, RELRO) are never touched, nor a binary with text
/// relocations (its "read-only" pages may be private copies). Every page
/// comes back unchanged from the file on its next use.
pub fn release_code_pages() -> usize {
    #[cfg(target_os = "linux")]
    {
        let mut released = 0usize;
        // SAFETY: the callback only reads the program headers the loader
        // hands it, and passes `released` back through `data`.
        unsafe {
            libc::dl_iterate_phdr(
                Some(release_segments),
                (&raw mut released).cast::<libc::c_void>(),
            );
        }
        released
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

#[cfg(target_os = "linux")]
const DT_NULL: isize = 0;
#[cfg(target_os = "linux")]
const DT_TEXTREL: isize = 22;
#[cfg(target_os = "linux")]
const DT_FLAGS: isize = 30;
#[cfg(target_os = "linux")]
const DF_TEXTREL: usize = 0x4;

/// `ElfW(Dyn)`: a tag and a value, both word-sized.
#[cfg(target_os = "linux")]
#[repr(C)]
struct Dyn {
    tag: isize,
    val: usize,
}

/// `dl_iterate_phdr` callback for the first object (the executable): returns 1
/// to stop there.
#[cfg(target_os = "linux")]
unsafe extern "C" fn release_segments(
    info: *mut libc::dl_phdr_info,
    _size: libc::size_t,
    data: *mut libc::c_void,
) -> libc::c_int {
    // SAFETY: the loader passes a valid `dl_phdr_info` whose `dlpi_phdr`
    // points to `dlpi_phnum` program headers of a loaded object, and `data`
    // is the `usize` of `release_code_pages`.
    unsafe {
        let info = &*info;
        if info.dlpi_phdr.is_null() {
            return 1;
        }
        let phdrs = std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum));
        let base = info.dlpi_addr as usize;
        // Text relocations make "read-only" pages private copies: keep them.
        for ph in phdrs.iter().filter(|p| p.p_type == libc::PT_DYNAMIC) {
            let mut d = (base + ph.p_vaddr as usize) as *const Dyn;
            while (*d).tag != DT_NULL {
                let textrel =
                    (*d).tag == DT_TEXTREL || ((*d).tag == DT_FLAGS && (*d).val & DF_TEXTREL != 0);
                if textrel {
                    return 1;
                }
                d = d.add(1);
            }
        }
        let page = match usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)) {
            Ok(p) if p.is_power_of_two() => p,
            _ => return 1,
        };
        let released = &mut *data.cast::<usize>();
        for ph in phdrs {
            if ph.p_type != libc::PT_LOAD || ph.p_flags & libc::PF_W != 0 {
                continue;
            }
            // Whole pages inside the segment only: a page shared with a
            // writable neighbour is left alone.
            let start = (base + ph.p_vaddr as usize).next_multiple_of(page);
            let end = (base + ph.p_vaddr as usize + ph.p_filesz as usize) & !(page - 1);
            if end > start
                && libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) == 0
            {
                *released += end - start;
            }
        }
        1
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static WRITTEN: AtomicUsize = AtomicUsize::new(7);
    static TABLE: [u64; 4] = [11, 22, 33, 44];

    fn rss_file_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssFile:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssFile")
    }

    #[test]
    fn code_pages_are_released_and_data_and_code_still_work() {
        WRITTEN.store(42, Ordering::SeqCst);
        let before = rss_file_kib();
        let released = release_code_pages();
        let after = rss_file_kib();
        assert!(released > 0, "nothing released");
        // Written data survives (writable segments are not touched); code and
        // constants come back from the file.
        assert_eq!(WRITTEN.load(Ordering::SeqCst), 42);
        assert_eq!(std::hint::black_box(&TABLE).iter().sum::<u64>(), 110);
        assert_eq!(format!("{:?}", vec![1, 2]), "[1, 2]");
        // Other tests run in parallel and fault pages back in: only a loose
        // check that RSS did not grow by the released amount.
        assert!(
            after < before + (released as u64 / 1024),
            "RssFile {before} -> {after} kB after releasing {released} bytes"
        );
    }
}
