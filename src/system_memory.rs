//! How much memory this process could still fill, so that a huge request
//! fails with ALLOC_FAILED instead of an OOM kill.
//!
//! Linux overcommits: `malloc` of 16 GiB on a 24 GiB machine succeeds even
//! when 20 GiB are in use, and the process is killed later, when the pages
//! are touched. rusparse fills (or counts into) what it allocates at once,
//! so a request larger than the memory left would be such a kill. For every
//! request of at least [`CHECKED_FROM_BYTES`], [`available_bytes`] reads
//! what the kernel says is left (`MemAvailable` plus free swap, and the
//! room under a cgroup memory limit (v1 or v2) when one is set) and the allocation
//! is refused when it would not fit. Smaller requests are not checked: the
//! probe reads two small files, negligible beside filling 256 MiB but not
//! beside a small allocation.
//!
//! A process can also set its own ceiling ([`memory_limit`], from
//! `RUSPARSE_MEMORY_LIMIT` or [`set_memory_limit`]): every request above it
//! fails the same way, whatever the machine has left.
//!
//! The check is a guard against requests that cannot fit, not a memory
//! manager: two threads allocating at the same moment both see the same
//! free memory. Where the files cannot be read (not Linux), nothing is
//! checked and the allocator decides alone.

use std::fs;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// The environment variable that sets [`memory_limit`] when the process
/// starts using rusparse: bytes, or a number with the suffix K, M, G or T
/// (powers of 1024; `KiB`, `MB` and the like read the same).
pub const MEMORY_LIMIT_ENV: &str = "RUSPARSE_MEMORY_LIMIT";

/// The limit in bytes; `u64::MAX` when none is set.
static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
static LIMIT_FROM_ENV: Once = Once::new();

/// The most memory one allocation, or one planning step, of rusparse may
/// ask for; `None` when unlimited (the default). A larger request fails
/// with [`crate::Error::AllocFailed`] (status ALLOC_FAILED) before anything
/// is allocated. Set by [`set_memory_limit`] or, at first use, by the
/// environment variable [`MEMORY_LIMIT_ENV`].
pub fn memory_limit() -> Option<u64> {
    LIMIT_FROM_ENV.call_once(|| {
        if let Some(limit) = std::env::var(MEMORY_LIMIT_ENV)
            .ok()
            .and_then(|v| parse_bytes(&v))
        {
            LIMIT.store(limit, Ordering::Relaxed);
        }
    });
    match LIMIT.load(Ordering::Relaxed) {
        u64::MAX => None,
        limit => Some(limit),
    }
}

/// Sets [`memory_limit`] for the whole process (`None`: no limit), over
/// what the environment said. Requests already granted are not affected.
pub fn set_memory_limit(limit: Option<u64>) {
    LIMIT_FROM_ENV.call_once(|| {});
    LIMIT.store(limit.unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// `"4096"`, `"512M"`, `"4G"`, `"4 GiB"`, `"1t"` as bytes; `None` when
/// unreadable (the limit is then left unset).
pub(crate) fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let number: u64 = t[..digits].parse().ok()?;
    let unit = t[digits..].trim().to_ascii_lowercase();
    let unit = unit.trim_end_matches('b').trim_end_matches('i');
    let shift = match unit {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => return None,
    };
    number.checked_mul(1 << shift)
}

/// Arrays of at least this many bytes ask for transparent huge pages
/// ([`advise_huge_pages`]).
pub const HUGE_PAGES_FROM_BYTES: usize = 4 << 20;

/// Asks the kernel to back the buffer of `v` (its whole capacity) with
/// transparent huge pages when it spans at least [`HUGE_PAGES_FROM_BYTES`]:
/// `madvise(MADV_HUGEPAGE)` on the whole 2 MiB pages inside it. Pages not
/// yet touched (fresh capacity, or a `vec![0; n]` that `calloc` got from
/// `mmap`) are then faulted 2 MiB at a time instead of 4 KiB; pages already
/// touched stay as they are. Filling fresh memory is dominated by those
/// faults: on the project's 2-core VM, 54 MB of new `f64`s took 19.5 ms in
/// 4 KiB pages and 4.2 ms in huge pages (numpy, median of 5; numpy advises
/// this for every large array by default, so scipy's and MKL's outputs get
/// it). The first huge pages a process touches can cost more on a virtual
/// machine whose host has not backed them yet (see `docs/benchmarks.md`).
/// Only advice: contents, ownership and the allocator are unchanged; where
/// the system lacks huge pages (THP `never`, other systems) or
/// `RUSPARSE_HUGE_PAGES=0` is set nothing happens, and a failed call is
/// ignored.
///
/// rusparse advises every array it allocates through its fallible
/// allocation helpers (C in [`crate::Context::spgemm`], plans, scratch); a
/// caller that allocates C itself may call this on its vectors (from C:
/// glibc's `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` makes `malloc` do the
/// same for large blocks).
pub fn advise_huge_pages<T>(v: &mut Vec<T>) {
    let bytes = v.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < HUGE_PAGES_FROM_BYTES || !huge_pages_wanted() {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let first = start.next_multiple_of(HUGE);
        let end = (start + bytes) & !(HUGE - 1);
        if end > first {
            extern "C" {
                fn madvise(
                    addr: *mut std::ffi::c_void,
                    len: usize,
                    advice: std::ffi::c_int,
                ) -> std::ffi::c_int;
            }
            const MADV_HUGEPAGE: std::ffi::c_int = 14;
            // SAFETY: [first, end) lies inside `v`'s buffer, which
            // stays allocated for the call; MADV_HUGEPAGE changes neither
            // contents nor mappings, only how later faults are served.
            unsafe {
                madvise(first as *mut std::ffi::c_void, end - first, MADV_HUGEPAGE);
            }
        }
    }
}

/// Grows `v` to `len` copies of `x` with the threads of the current rayon
/// pool (call it inside [`Context::run`](crate::Context::run) to use a
/// context's threads), in blocks of 2 MiB so that no two threads fault the
/// same huge page. The first writes to a fresh allocation are its page
/// faults, about 1.5 µs per 4 KiB page on the project's VM: split over the
/// threads, as the numeric phase that overwrites the values would, they no
/// longer cost a product's first call a single-threaded pass over C. Does
/// nothing when `v` already holds `len` elements or more.
///
/// # Panics
/// When `len` exceeds `v`'s capacity (reserve first, fallibly).
pub fn resize_in_parallel<T: Copy + Send + Sync>(v: &mut Vec<T>, len: usize, x: T) {
    let from = v.len();
    if len <= from {
        return;
    }
    assert!(len <= v.capacity(), "resize_in_parallel: reserve first");
    const BLOCK_BYTES: usize = 2 << 20;
    let block = (BLOCK_BYTES / std::mem::size_of::<T>().max(1)).max(1);
    let fill = |chunk: &mut [std::mem::MaybeUninit<T>]| {
        chunk.iter_mut().for_each(|e| {
            e.write(x);
        })
    };
    let spare = &mut v.spare_capacity_mut()[..len - from];
    if spare.len() <= block {
        fill(spare);
    } else {
        // Blocks start on 2 MiB boundaries of the address space.
        let misaligned = (spare.as_ptr() as usize % BLOCK_BYTES) / std::mem::size_of::<T>().max(1);
        let head_len = ((block - misaligned) % block).min(spare.len());
        let (head, rest) = spare.split_at_mut(head_len);
        let pieces = std::iter::once(head)
            .chain(rest.chunks_mut(block))
            .collect();
        crate::parallel::map_pieces(pieces, fill);
    }
    // SAFETY: every element of [from, len) was written just above, and
    // `len` is within the capacity.
    unsafe { v.set_len(len) };
}

/// The environment variable that turns [`advise_huge_pages`] off when `0`
/// (read once per process).
pub const HUGE_PAGES_ENV: &str = "RUSPARSE_HUGE_PAGES";

/// False when `RUSPARSE_HUGE_PAGES=0`.
fn huge_pages_wanted() -> bool {
    static WANTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WANTED.get_or_init(|| std::env::var(HUGE_PAGES_ENV).map_or(true, |v| v.trim() != "0"))
}

/// Requests below this size are not checked (256 MiB).
pub(crate) const CHECKED_FROM_BYTES: u64 = 256 << 20;

/// The memory the system has left, when a request of `bytes` is large
/// enough to be checked ([`CHECKED_FROM_BYTES`] or more) and would not fit
/// in it; `None` when it fits, is not checked, or the system does not say.
pub(crate) fn short_of_memory(bytes: u64) -> Option<u64> {
    if bytes < CHECKED_FROM_BYTES {
        return None;
    }
    available_bytes().filter(|&left| bytes > left)
}

/// Bytes this process could still allocate and touch, or `None` when the
/// system does not say.
pub(crate) fn available_bytes() -> Option<u64> {
    let meminfo = fs::read_to_string("/proc/meminfo").ok()?;
    let machine = meminfo_available(&meminfo)?;
    Some(match cgroup_room() {
        Some(room) => machine.min(room),
        None => machine,
    })
}

/// `MemAvailable + SwapFree` from the text of `/proc/meminfo`, in bytes.
fn meminfo_available(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib.saturating_mul(1024))
    };
    Some(field("MemAvailable")?.saturating_add(field("SwapFree").unwrap_or(0)))
}

/// The files of one cgroup version's memory controller.
struct CgroupFiles {
    /// Where the controller is mounted.
    mount: &'static str,
    /// The limit, the usage and the statistics file.
    limit: &'static str,
    usage: &'static str,
    stat: &'static str,
    /// The page-cache line of the statistics.
    cache: &'static str,
}

const CGROUP_V2: CgroupFiles = CgroupFiles {
    mount: "/sys/fs/cgroup",
    limit: "memory.max",
    usage: "memory.current",
    stat: "memory.stat",
    cache: "file ",
};

const CGROUP_V1: CgroupFiles = CgroupFiles {
    mount: "/sys/fs/cgroup/memory",
    limit: "memory.limit_in_bytes",
    usage: "memory.usage_in_bytes",
    stat: "memory.stat",
    cache: "total_cache ",
};

/// Room under this process's cgroup memory limit (v2 or v1), when one is
/// set: the limit less what the group uses, with the group's page cache
/// counted as free (the kernel reclaims it before it kills).
fn cgroup_room() -> Option<u64> {
    let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
    let (files, group) = match cgroup_v2_path(&membership) {
        Some(path) => (CGROUP_V2, path),
        None => (CGROUP_V1, cgroup_v1_memory_path(&membership)?),
    };
    // The group's own folder, or the mount itself when this process sees
    // its group as the root (a container's namespaced mount).
    [format!("{}{group}", files.mount), files.mount.to_string()]
        .iter()
        .find_map(|dir| {
            let read = |name: &str| fs::read_to_string(format!("{dir}/{name}")).ok();
            let stat = read(files.stat).unwrap_or_default();
            cgroup_room_from(&read(files.limit)?, &read(files.usage)?, &stat, files.cache)
        })
}

/// The cgroup v2 path of this process (the line `0::/path`), when the
/// memory controller is not mounted as v1.
fn cgroup_v2_path(text: &str) -> Option<&str> {
    if cgroup_v1_memory_path(text).is_some() {
        return None;
    }
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// The cgroup v1 path of this process's memory controller (`N:memory:/path`).
fn cgroup_v1_memory_path(text: &str) -> Option<&str> {
    text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })
}

/// Limits at or above this are "no limit" (v1 writes 2^63 rounded to pages).
const NO_LIMIT: u64 = 1 << 60;

/// `limit − usage + cache` from the contents of the limit, usage and
/// statistics files; `None` when there is no limit.
fn cgroup_room_from(limit: &str, usage: &str, stat: &str, cache_line: &str) -> Option<u64> {
    let limit: u64 = limit.trim().parse().ok()?; // v2 writes "max" for no limit
    if limit >= NO_LIMIT {
        return None;
    }
    let usage: u64 = usage.trim().parse().ok()?;
    let cache = stat
        .lines()
        .find_map(|l| l.strip_prefix(cache_line))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Some(limit.saturating_sub(usage).saturating_add(cache.min(usage)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_in_parallel_writes_every_new_element_and_keeps_the_old() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // Below one block, across several blocks, from an empty and from a
        // partly filled vector, with a buffer start that is not 2 MiB aligned.
        for (kept, len) in [(0, 0), (0, 5), (3, 1000), (0, 3 << 18), (7, (5 << 18) + 11)] {
            let mut v: Vec<u64> = Vec::with_capacity(len + 1);
            v.extend((0..kept as u64).map(|i| i + 100));
            pool.install(|| resize_in_parallel(&mut v, len.max(kept), 9));
            assert_eq!(v.len(), len.max(kept));
            assert!(v[..kept]
                .iter()
                .enumerate()
                .all(|(i, &x)| x == i as u64 + 100));
            assert!(v[kept..].iter().all(|&x| x == 9), "len {len}");
        }
        // Shorter than now: unchanged.
        let mut v = vec![1u8, 2, 3];
        resize_in_parallel(&mut v, 1, 0);
        assert_eq!(v, [1, 2, 3]);
    }

    #[test]
    #[should_panic(expected = "reserve first")]
    fn resize_in_parallel_refuses_to_grow_past_the_capacity() {
        let mut v: Vec<u32> = Vec::with_capacity(4);
        resize_in_parallel(&mut v, 5, 0);
    }

    /// The `VmFlags` of the mapping of this process that holds `addr`.
    #[cfg(target_os = "linux")]
    fn vm_flags_at(addr: usize) -> Option<String> {
        let smaps = fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = range.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&addr);
                    continue;
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.trim().to_string());
                }
            }
        }
        None
    }

    #[test]
    fn large_arrays_are_advised_huge_pages_and_small_ones_are_not() {
        let mut big: Vec<f64> = Vec::with_capacity(HUGE_PAGES_FROM_BYTES);
        big.push(1.5);
        advise_huge_pages(&mut big);
        big.resize(HUGE_PAGES_FROM_BYTES, 2.0);
        assert_eq!(
            (big[0], big[big.len() - 1], big.len()),
            (1.5, 2.0, HUGE_PAGES_FROM_BYTES)
        );
        let mut small: Vec<f64> = Vec::with_capacity(1000);
        advise_huge_pages(&mut small);
        assert_eq!(small.len(), 0);
        // Where the kernel has transparent huge pages, the middle of the
        // large array is in a mapping flagged `hg` (MADV_HUGEPAGE).
        #[cfg(target_os = "linux")]
        if std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            let middle = big.as_ptr() as usize + HUGE_PAGES_FROM_BYTES * 4;
            let flags = vm_flags_at(middle).expect("the array's mapping in /proc/self/smaps");
            assert!(flags.split(' ').any(|f| f == "hg"), "VmFlags {flags}");
        }
    }

    #[test]
    fn meminfo_fields_are_added_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\n\
                    MemAvailable:   20000000 kB\nSwapTotal: 4 kB\nSwapFree:       1000 kB\n";
        assert_eq!(meminfo_available(text), Some((20_000_000 + 1000) * 1024));
        // No swap line: the available memory alone.
        assert_eq!(meminfo_available("MemAvailable: 8 kB\n"), Some(8 * 1024));
        // Without MemAvailable nothing is known.
        assert_eq!(meminfo_available("MemFree: 8 kB\n"), None);
    }

    #[test]
    fn cgroup_room_counts_page_cache_as_free() {
        let stat = "anon 1000\nfile 300\nkernel 5\n";
        let room = |limit, usage| cgroup_room_from(limit, usage, stat, "file ");
        assert_eq!(room("5000\n", "2000\n"), Some(3300));
        // A group over its limit (cache being reclaimed) has only its cache.
        assert_eq!(room("1000\n", "1500\n"), Some(300));
        assert_eq!(room("max\n", "2000\n"), None);
        assert_eq!(room("9223372036854771712\n", "2000\n"), None);
        let v1 = "cache 10\ntotal_cache 300\n";
        assert_eq!(
            cgroup_room_from("5000", "2000", v1, "total_cache "),
            Some(3300)
        );
    }

    #[test]
    fn cgroup_paths_of_both_versions() {
        let v2 = "0::/user.slice/x.scope\n";
        assert_eq!(cgroup_v2_path(v2), Some("/user.slice/x.scope"));
        assert_eq!(cgroup_v1_memory_path(v2), None);
        let v1 = "5:devices:/\n4:memory:/api/63b\n2:cpu,cpuacct:/\n0::/\n";
        assert_eq!(cgroup_v1_memory_path(v1), Some("/api/63b"));
        // A v1 memory controller wins over the unified line beside it.
        assert_eq!(cgroup_v2_path(v1), None);
        assert_eq!(cgroup_v1_memory_path("3:cpuset,memory:/g\n"), Some("/g"));
    }

    #[test]
    fn limits_are_read_with_units() {
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert_eq!(parse_bytes(" 512M "), Some(512 << 20));
        assert_eq!(parse_bytes("4G"), Some(4 << 30));
        assert_eq!(parse_bytes("4 GiB"), Some(4 << 30));
        assert_eq!(parse_bytes("2gb"), Some(2 << 30));
        assert_eq!(parse_bytes("1t"), Some(1 << 40));
        assert_eq!(parse_bytes("1b"), Some(1));
        for bad in [
            "",
            "G",
            "4X",
            "-1",
            "1.5G",
            "99999999999999999999",
            "20000000T",
        ] {
            assert_eq!(parse_bytes(bad), None, "{bad}");
        }
    }

    #[test]
    fn this_machine_reports_some_memory() {
        if cfg!(target_os = "linux") {
            let bytes = available_bytes().expect("Linux has /proc/meminfo");
            assert!(bytes > 1 << 20, "{bytes}");
        }
    }
}
