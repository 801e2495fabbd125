//! The process's memory allocator and how it is tuned: mimalloc, returning freed memory
//! to the system at once, without transparent huge pages; glibc's malloc (still used by
//! SQLite) with two arenas.
//!
//! Measured on a mount listing a directory of a million entries on Redis
//! (`benches/big-dir.sh`, docs/PERFORMANCE.md): untuned, the mount grew by 119 MB and
//! kept 74 MB; tuned (and with the metadata cache's budget), by 25 MB, 13 MB kept.

/// mimalloc instead of glibc's allocator: a readdirplus page allocates thousands of small
/// keys and values, and glibc's malloc/free were a quarter of `ls -l`'s CPU in the mount.
/// The `system-allocator` feature keeps glibc's, for heap profilers that hook malloc
/// (`heaptrack`, see docs/PERFORMANCE.md).
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tune the allocators; first thing in `main`, before any other thread exists.
pub fn tune() {
    limit_malloc_arenas();
    disable_huge_pages();
    #[cfg(not(feature = "system-allocator"))]
    purge_at_once();
}

/// Cap glibc's malloc arenas before any thread starts. By default every thread that
/// allocates may get its own arena (up to 8 per core); block buffers are filled on the
/// FUSE threads and freed on the runtime's, and each arena keeps what was freed into it:
/// measured, the mount's peak RSS in `juicefs bench` went from 322 MB (2 arenas) to
/// 543 MB (default). Two arenas cost no measurable throughput there.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    const ARENAS: i32 = 2;
    // SAFETY: mallopt only changes allocator tuning; it is called first thing in main,
    // before any other thread exists, as glibc requires for M_ARENA_MAX to hold.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

/// No transparent huge pages for this process. mimalloc reserves a 1 GiB arena and the
/// kernel's khugepaged fills sparsely used 2 MiB stretches of it in the background: an
/// idle mount grew from 75 to 104 MB after listing a million entries, 51 MB of it huge
/// pages. mimalloc is built without its own huge-page advice (`no_thp`); this also
/// covers kernels whose THP mode is `always`. Best effort: a kernel without the flag
/// only costs memory.
#[cfg(target_os = "linux")]
fn disable_huge_pages() {
    if let Err(e) = nix::sys::prctl::set_thp_disable(true) {
        eprintln!("strata: could not turn off transparent huge pages: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_huge_pages() {}

/// mimalloc's option `purge_delay` (`mi_option_purge_delay` in mimalloc.h, version 3).
#[cfg(not(feature = "system-allocator"))]
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

#[cfg(not(feature = "system-allocator"))]
#[allow(unsafe_code)]
unsafe extern "C" {
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Give memory freed by a thread back to the system at once instead of a second later
/// (mimalloc 3's default): a delayed purge only happens when the owning thread next
/// calls the allocator, so pages freed by a thread that then went idle (a blocking-pool
/// thread after a listing) stayed resident.
/// Measured: a million-entry listing on Redis left 28 MB instead of 13 MB behind, and
/// writing and reading 3 GiB through a mount was as fast with either (peak RSS 151 MB
/// instead of 186 MB).
#[cfg(not(feature = "system-allocator"))]
fn purge_at_once() {
    // SAFETY: mi_option_set only stores the option's value; mimalloc reads it at each
    // purge decision, and the index is the one of mimalloc 3's header (checked below).
    #[allow(unsafe_code)]
    unsafe {
        mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

#[cfg(all(test, not(feature = "system-allocator")))]
mod tests {
    use super::*;

    #[allow(unsafe_code)]
    unsafe extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
    }

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: reading and setting an option of the allocator this test links.
        #[allow(unsafe_code)]
        let (before, after) = unsafe {
            let before = mi_option_get(MI_OPTION_PURGE_DELAY);
            purge_at_once();
            (before, mi_option_get(MI_OPTION_PURGE_DELAY))
        };
        // mimalloc 3's default purge_delay is 1000 ms; no neighbouring option defaults to
        // 1000, so this is the right index.
        assert_eq!(before, 1000, "option 15 is not purge_delay");
        assert_eq!(after, 0);
    }
}
