//! Memory a product needs beyond A, B and C, and the choice of the fastest
//! configuration that fits a byte budget (`Context::set_memory_budget`,
//! `rusparseSetMemoryBudget`).
//!
//! A back end describes each configuration it could run (an algorithm and
//! how many chunks of rows it works on at once) by the bytes it would hold
//! at its peak, an upper bound computed from the plan's row statistics
//! before anything is allocated. [`fastest_fitting`] takes the candidates
//! fastest first and returns the first whose peak fits; when none does, the
//! error names the budget and the smallest one that would work, so no
//! product runs out of memory partway.
//!
//! The budget counts everything rusparse allocates for the product on the
//! context's memory: the plan (row work, transposed operands, C's row
//! offsets), every phase's workspaces, the scratch the context keeps
//! between products, and (C ABI) the external buffers it asks for. It does
//! not count the caller's A, B and C.

use crate::error::Error;

/// Bytes a product holds at each step, beyond A, B and C (upper bounds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Held from the plan to its end: row work, transposed operands, C's
    /// row offsets, anything a later phase reads.
    pub kept: u64,
    /// The largest step's own allocations on top of `kept` (planning's
    /// samples, a phase's workspaces, gathered values), freed when it ends.
    pub transient: u64,
}

impl MemoryNeed {
    /// The peak.
    pub fn peak(&self) -> u64 {
        self.kept.saturating_add(self.transient)
    }
}

/// The first of `candidates` (fastest first, each with its peak in bytes)
/// whose peak is at most `budget`; with no budget, the first.
///
/// # Errors
/// The smallest peak among them (the smallest budget that would work) when
/// none fits, or `None` when there are no candidates.
pub fn fastest_fitting<C: Copy>(
    budget: Option<u64>,
    candidates: &[(C, u64)],
) -> std::result::Result<(C, u64), Option<u64>> {
    let fits = |&&(_, peak): &&(C, u64)| budget.is_none_or(|b| peak <= b);
    match candidates.iter().find(fits) {
        Some(&c) => Ok(c),
        None => Err(candidates.iter().map(|&(_, p)| p).min()),
    }
}

/// The error for a budget no configuration fits: ALLOC_FAILED on the host
/// (the GPU's INSUFFICIENT_RESOURCES maps from the same error).
pub fn too_small(budget: u64, smallest: u64, what: &str) -> Error {
    Error::AllocFailed(format!(
        "{} is too small for {what}: the smallest budget that would work is {smallest} bytes \
         ({}); nothing was allocated",
        the_budget(budget),
        human(smallest)
    ))
}

/// "the memory budget of N bytes (N MiB)", as every refusal names it.
pub fn the_budget(budget: u64) -> String {
    format!("the memory budget of {budget} bytes ({})", human(budget))
}

/// The error for a budget below what planning alone may take.
pub fn too_small_to_plan(budget: u64, planning: u64) -> Error {
    Error::AllocFailed(format!(
        "{} is too small to plan this product: planning alone may take {planning} bytes ({}), \
         and the phases need more; nothing was allocated",
        the_budget(budget),
        human(planning)
    ))
}

/// The room a phase leaves the context's kept scratch under `budget` when
/// the product's own peak is `peak`: half of what is left, because buffers
/// kept from before the phase may be taken by it and grow, while the pool
/// refills up to the room.
pub fn scratch_room(budget: u64, peak: u64) -> usize {
    usize::try_from(budget.saturating_sub(peak) / 2).unwrap_or(usize::MAX)
}

/// `bytes` in KiB, MiB or GiB, for messages.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["bytes", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Concurrency levels to try, widest first: `threads`, then halving to 1.
pub fn concurrency_levels(threads: usize) -> Vec<usize> {
    let mut levels = vec![threads.max(1)];
    while let Some(&last) = levels.last() {
        if last == 1 {
            break;
        }
        levels.push(last / 2);
    }
    levels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_fitting_candidate_wins_and_the_error_names_the_smallest() {
        let c = [("fast", 300u64), ("slower", 200), ("slowest", 250)];
        assert_eq!(fastest_fitting(None, &c), Ok(("fast", 300)));
        assert_eq!(fastest_fitting(Some(300), &c), Ok(("fast", 300)));
        assert_eq!(fastest_fitting(Some(299), &c), Ok(("slower", 200)));
        assert_eq!(fastest_fitting(Some(199), &c), Err(Some(200)));
        assert_eq!(fastest_fitting::<u8>(Some(1), &[]), Err(None));
        let e = too_small(199, 200, "this product");
        assert!(
            matches!(&e, Error::AllocFailed(m) if m.contains("199 bytes") && m.contains("is 200 bytes")),
            "{e}"
        );
    }

    #[test]
    fn levels_halve_down_to_one() {
        assert_eq!(concurrency_levels(8), [8, 4, 2, 1]);
        assert_eq!(concurrency_levels(6), [6, 3, 1]);
        assert_eq!(concurrency_levels(1), [1]);
        assert_eq!(concurrency_levels(0), [1]);
        assert_eq!(human(3 << 20), "3.0 MiB");
    }
}
