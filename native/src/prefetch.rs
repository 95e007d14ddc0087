//! Software prefetch, shared by the hash tables and filters whose next probes
//! are known before the current one is done.

/// Hints the CPU to load the cache line of `items[i]`; no effect on results,
/// and none at all when `i` is out of range.
#[inline(always)]
pub(crate) fn prefetch<T>(items: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(x) = items.get(i) {
            // SAFETY: prefetch never faults and does not dereference in the
            // language sense; the address is inside `items` anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((x as *const T).cast::<i8>())
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (items, i);
    }
}
