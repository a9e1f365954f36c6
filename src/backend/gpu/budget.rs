//! A device seen through one product's memory budget ([`BudgetedDevice`]).
//!
//! Every device allocation of a GPU product (the staged copies of host
//! arrays, the row metadata, transposes, spill lists, global hash tables,
//! C's device copy) goes through the product's [`BudgetedDevice`], which
//! counts the bytes live and their peak. The planner reads
//! [`GpuDevice::budget`] to size the global hash tables' batches and to
//! refuse, before allocating, a step that cannot fit. The count is also a
//! safety net: an allocation that would take the product past its budget
//! fails with INSUFFICIENT_RESOURCES instead of being made.
//!
//! Without a budget, the device's free memory when the product starts
//! (where the runtime says) stands in for one: the planner sizes batches
//! and refuses steps by it the same way, but allocations are left to the
//! device (its memory pool may hold memory the free count misses).
//!
//! With a [`DeviceAllocator`] (the caller's hooks), the budgeted device
//! takes every allocation from it instead of the runtime, counted the same
//! way.

use super::allocator::DeviceAllocator;
use super::device::{GpuDevice, GpuKernels, RawEvent, RawStream};
use crate::backend::kernel_source::KernelTypes;
use crate::error::{Error, Result};
use crate::plan::gpu_bins::DeviceLimits;
use crate::plan::memory::{human, the_budget};
use crate::types::BackendKind;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A product's memory budget on a device and the bytes it holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetState {
    /// The budget in bytes.
    pub budget: u64,
    /// Bytes the product holds now.
    pub live: u64,
    /// The budget is the device's free memory when the product started
    /// (no budget was set).
    pub implicit: bool,
}

impl BudgetState {
    /// Bytes the product may still allocate.
    pub fn room(&self) -> u64 {
        self.budget.saturating_sub(self.live)
    }

    fn what(&self) -> String {
        if self.implicit {
            format!(
                "the device's free memory ({} bytes, {}; no memory budget is set)",
                self.budget,
                human(self.budget)
            )
        } else {
            the_budget(self.budget)
        }
    }

    /// The error for a step that does not fit: INSUFFICIENT_RESOURCES
    /// naming the smallest budget that would work.
    pub fn too_small(&self, smallest: u64, what: &str) -> Error {
        Error::InsufficientResources(format!(
            "{} is too small for {what}: the smallest budget that would work is {smallest} bytes \
             ({}); nothing more was allocated",
            self.what(),
            human(smallest)
        ))
    }

    /// The error for a budget below what work estimation alone takes (the
    /// staged inputs, row metadata and transposes).
    pub fn too_small_to_plan(&self, planning: u64) -> Error {
        Error::InsufficientResources(format!(
            "{} is too small to plan this product: work estimation alone takes {planning} bytes \
             ({}), and the phases need more; nothing more was allocated",
            self.what(),
            human(planning)
        ))
    }
}

/// What bounds a product's device memory, and where it comes from.
#[derive(Debug, Clone, Default)]
pub struct ProductMemory {
    /// The budget in bytes (`None`: the device's free memory when the
    /// product starts, where the runtime says, planned by but not
    /// enforced).
    pub budget: Option<u64>,
    /// The caller's allocator, in place of the runtime's.
    pub allocator: Option<Arc<dyn DeviceAllocator>>,
}

impl From<Option<u64>> for ProductMemory {
    /// A budget and the runtime's allocator.
    fn from(budget: Option<u64>) -> Self {
        ProductMemory {
            budget,
            allocator: None,
        }
    }
}

#[derive(Debug, Default)]
struct Meter {
    live: u64,
    peak: u64,
    sizes: HashMap<u64, u64>,
}

/// `inner` with the allocations of one product counted and held within
/// `budget` (see the module docs).
#[derive(Debug)]
pub struct BudgetedDevice {
    inner: Arc<dyn GpuDevice>,
    /// The budget set, enforced at every allocation.
    budget: Option<u64>,
    /// Without one, the device's free memory when the product started.
    free_at_start: Option<u64>,
    meter: Mutex<Meter>,
    /// The caller's allocator, taking the place of the runtime's.
    allocator: Option<Arc<dyn DeviceAllocator>>,
}

impl BudgetedDevice {
    /// `inner` for one product, with its memory's budget and allocator (a
    /// budget alone: `Option<u64>`, see [`ProductMemory::budget`]).
    pub fn wrap(
        inner: Arc<dyn GpuDevice>,
        memory: impl Into<ProductMemory>,
    ) -> Arc<BudgetedDevice> {
        let ProductMemory { budget, allocator } = memory.into();
        let free_at_start = budget.is_none().then(|| inner.free_memory()).flatten();
        Arc::new(BudgetedDevice {
            inner,
            budget,
            free_at_start,
            meter: Mutex::default(),
            allocator,
        })
    }

    fn meter(&self) -> std::sync::MutexGuard<'_, Meter> {
        self.meter.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most bytes the product held at once so far.
    pub fn peak(&self) -> u64 {
        self.meter().peak
    }

    /// Bytes the product holds now.
    pub fn live(&self) -> u64 {
        self.meter().live
    }
}

impl GpuDevice for BudgetedDevice {
    fn backend(&self) -> BackendKind {
        self.inner.backend()
    }
    fn ordinal(&self) -> usize {
        self.inner.ordinal()
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn limits(&self) -> &DeviceLimits {
        self.inner.limits()
    }
    fn bind(&self) -> Result<()> {
        self.inner.bind()
    }
    fn holds(&self, addr: usize) -> bool {
        self.inner.holds(addr)
    }
    fn kernels(&self, types: KernelTypes) -> Result<Arc<dyn GpuKernels>> {
        self.inner.kernels(types)
    }
    fn free_memory(&self) -> Option<u64> {
        self.inner.free_memory()
    }
    fn budget(&self) -> Option<BudgetState> {
        let live = self.meter().live;
        match (self.budget, self.free_at_start) {
            (Some(budget), _) => Some(BudgetState {
                budget,
                live,
                implicit: false,
            }),
            (None, Some(budget)) => Some(BudgetState {
                budget,
                live,
                implicit: true,
            }),
            (None, None) => None,
        }
    }

    fn alloc(&self, bytes: usize, stream: Option<RawStream>) -> Result<u64> {
        let n = bytes as u64;
        {
            let m = self.meter();
            if let Some(b) = self.budget.filter(|&b| m.live.saturating_add(n) > b) {
                return Err(Error::InsufficientResources(format!(
                    "{} does not hold {n} more bytes with {} in use",
                    the_budget(b),
                    m.live
                )));
            }
        }
        let ptr = match &self.allocator {
            None => self.inner.alloc(bytes, stream)?,
            Some(a) => a
                .alloc(bytes, stream.unwrap_or(std::ptr::null_mut()))
                .ok_or_else(|| {
                    Error::InsufficientResources(format!(
                        "the device allocator set with rusparseSetAllocator refused {n} bytes \
                         ({})",
                        human(n)
                    ))
                })?,
        };
        let mut m = self.meter();
        m.live += n;
        m.peak = m.peak.max(m.live);
        m.sizes.insert(ptr, n);
        Ok(ptr)
    }

    unsafe fn free(&self, ptr: u64, stream: Option<RawStream>) {
        let bytes = {
            let mut m = self.meter();
            let n = m.sizes.remove(&ptr).unwrap_or(0);
            m.live -= n;
            n
        };
        // SAFETY: the caller's contract, passed on; `bytes` is what the
        // allocation asked for.
        unsafe {
            match &self.allocator {
                None => self.inner.free(ptr, stream),
                Some(a) => a.free(ptr, bytes as usize, stream.unwrap_or(std::ptr::null_mut())),
            }
        }
    }

    unsafe fn memset(&self, dst: u64, byte: u8, bytes: usize, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.memset(dst, byte, bytes, stream) }
    }
    unsafe fn upload(&self, dst: u64, src: &[u8], stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.upload(dst, src, stream) }
    }
    unsafe fn download(&self, dst: &mut [u8], src: u64, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.download(dst, src, stream) }
    }
    unsafe fn copy(&self, dst: u64, src: u64, bytes: usize, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.copy(dst, src, bytes, stream) }
    }
    fn create_stream(&self) -> Result<RawStream> {
        self.inner.create_stream()
    }
    unsafe fn destroy_stream(&self, stream: RawStream) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.destroy_stream(stream) }
    }
    fn create_event(&self) -> Result<RawEvent> {
        self.inner.create_event()
    }
    unsafe fn destroy_event(&self, event: RawEvent) {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.destroy_event(event) }
    }
    unsafe fn record(&self, event: RawEvent, stream: RawStream) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.record(event, stream) }
    }
    unsafe fn wait(&self, stream: RawStream, event: RawEvent) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.wait(stream, event) }
    }
    unsafe fn synchronize(&self, event: RawEvent) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.synchronize(event) }
    }
}
