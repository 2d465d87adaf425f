//! The process's allocator: mimalloc, told to give freed memory back to the system at once.
//!
//! Many small allocations live briefly on the admin's hot path (a run's request, its ledger
//! rows): glibc's malloc spent a fifth of the admin's CPU on them at 10,000 fires a second.
//! mimalloc as built by default kept what it freed for about 10 s (a purge delay of 1 s times
//! its arena multiplier of 10) and asked for transparent huge pages: the admin's peak RSS at
//! 10,000 fires a second was 166-181 MB, 128-138 MB without huge pages, 86-91 MB without either.
//! Huge pages are off at build time (the crate's `no_thp` feature); the purge delay is set to 0
//! here unless `MIMALLOC_PURGE_DELAY` says otherwise. The CPU per fire did not change
//! measurably.
//!
//! The crate's `override` feature makes mimalloc the process's `malloc` as well, so SQLite's
//! allocations (compiled in C) leave glibc's arenas too: they were an eighth of the admin's CPU
//! at 10,000 fires a second on SQLite, with their frees on other threads than their mallocs.

use std::ffi::{c_int, c_long};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (its 3.x header).
const MI_OPTION_PURGE_DELAY: c_int = 15;

unsafe extern "C" {
    fn mi_option_set(option: c_int, value: c_long);
}

/// Makes mimalloc return freed memory at once, unless the environment chose a delay.
pub(crate) fn return_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: it only stores an option's value; mimalloc reads the delay at its next
        // purge, from any thread.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

#[cfg(test)]
mod tests {
    use super::{MI_OPTION_PURGE_DELAY, c_int, c_long};

    unsafe extern "C" {
        fn mi_option_get(option: c_int) -> c_long;
    }

    /// The purge delay in effect, in ms.
    fn purge_delay_ms() -> c_long {
        // SAFETY: it only reads an option's value.
        unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
    }

    /// The option's index is copied from mimalloc's header: a mimalloc whose enum moved would
    /// set some other option. Its default (1,000 ms) and the new value pin it.
    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        assert_eq!(purge_delay_ms(), 1000, "mimalloc's default purge delay");
        super::return_freed_memory_at_once();
        assert_eq!(purge_delay_ms(), 0);
    }
}
