//! Memory budgets: the most bytes a backend's device may hold, checked by
//! the alloc system before any compute buffer grows (llama.cpp's
//! `--fit`-style limits, ggml has none).
//!
//! A budget counts everything on the device — weights, caches, other
//! buffers in the context ([`Context::held_bytes`]) — plus the compute
//! memory the scheduler's plan needs. When the sum would pass the budget,
//! [`Error::BudgetExceeded`] names the device and nothing is allocated.

use std::fmt;

use gantry_arenas::BufferId;

use super::{BackendIndex, BackendSet};
use crate::alloc::BufferGrowth;
use crate::{Context, Error, Result};

/// What one backend's device holds and needs, and its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendMemory {
    /// The backend's name.
    pub backend: String,
    /// Its device's name (what a budget is keyed by on the command line).
    pub device: String,
    /// The buffer type its compute memory comes from.
    pub buffer_type: String,
    /// Bytes of compute memory the scheduler's plan takes (0 for a backend
    /// sharing another's buffer type: counted once, at the first).
    pub compute: usize,
    /// Bytes the device holds besides the scheduler's compute memory.
    pub held: usize,
    /// The budget, if any.
    pub budget: Option<usize>,
}

impl BackendMemory {
    /// Compute memory and everything else the device holds.
    pub fn total(&self) -> usize {
        self.compute + self.held
    }

    /// Whether the total is within the budget (always, without one).
    pub fn fits(&self) -> bool {
        self.budget.is_none_or(|b| self.total() <= b)
    }
}

/// Memory per backend after a [`Scheduler::reserve`](super::Scheduler::reserve),
/// in priority order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// One row per backend.
    pub backends: Vec<BackendMemory>,
}

impl MemoryReport {
    /// Compute bytes per backend (what `reserve` used to return).
    pub fn compute_bytes(&self) -> Vec<usize> {
        self.backends.iter().map(|b| b.compute).collect()
    }

    /// Compute bytes over every backend.
    pub fn total_compute(&self) -> usize {
        self.backends.iter().map(|b| b.compute).sum()
    }
}

impl fmt::Display for MemoryReport {
    /// One line per backend: `CPU (CPU): compute 1.1M + held 97.0M = 98.1M of 4.0G`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use super::describe::fmt_bytes;
        for b in &self.backends {
            write!(
                f,
                "{} ({}): compute {} + held {} = {}",
                b.backend,
                b.buffer_type,
                fmt_bytes(b.compute),
                fmt_bytes(b.held),
                fmt_bytes(b.total())
            )?;
            match b.budget {
                Some(budget) => writeln!(f, " of {}", fmt_bytes(budget))?,
                None => writeln!(f, " (no budget)")?,
            }
        }
        Ok(())
    }
}

/// Budgets per backend, in the scheduler's priority order.
#[derive(Debug, Clone, Default)]
pub struct Budgets {
    bytes: Vec<Option<usize>>,
}

impl Budgets {
    /// Budgets from the scheduler parameters: empty (none) or one per backend.
    pub fn new(set: &BackendSet, given: &[Option<usize>]) -> Result<Self> {
        if !given.is_empty() && given.len() != set.len() {
            return Err(Error::Scheduler(format!(
                "{} memory budgets given for {} backends (give one per backend, or none)",
                given.len(),
                set.len()
            )));
        }
        let mut bytes = given.to_vec();
        bytes.resize(set.len(), None);
        Ok(Self { bytes })
    }

    /// The budget of backend `b`.
    pub fn of(&self, b: BackendIndex) -> Option<usize> {
        self.bytes.get(b.get()).copied().flatten()
    }

    /// Sets (or, with `None`, removes) backend `b`'s budget.
    pub fn set(&mut self, b: BackendIndex, bytes: Option<usize>) {
        if let Some(slot) = self.bytes.get_mut(b.get()) {
            *slot = bytes;
        }
    }

    /// Whether any backend has a budget.
    pub fn any(&self) -> bool {
        self.bytes.iter().any(Option::is_some)
    }
}

/// What every backend would hold with compute buffers of `compute_after`
/// bytes per buffer type (by the allocator's index), the allocator's
/// current `own` buffers replaced by them.
pub fn memory_report(
    ctx: &Context,
    set: &BackendSet,
    budgets: &Budgets,
    compute_after: &[usize],
    own: &[BufferId],
) -> MemoryReport {
    let mut counted = [false; super::MAX_BACKENDS];
    let backends = set
        .indices()
        .map(|b| {
            let backend = set.backend(b);
            let device = backend.device();
            let slot = set.alloc_buft(b).get();
            // A buffer type two backends share is counted at the first.
            let compute = if counted[slot] { 0 } else { compute_after.get(slot).copied().unwrap_or(0) };
            counted[slot] = true;
            let own_here: usize = own
                .iter()
                .filter_map(|&id| ctx.buffer(id).ok())
                .filter(|e| e.is_on(device))
                .map(|e| e.buffer.size())
                .sum();
            BackendMemory {
                backend: backend.name().to_owned(),
                device: device.name().to_owned(),
                buffer_type: set.buft(b).name().to_owned(),
                compute,
                held: ctx.held_bytes(device).saturating_sub(own_here),
                budget: budgets.of(b),
            }
        })
        .collect();
    MemoryReport { backends }
}

/// The alloc system's check before buffers grow: an error naming the first
/// device whose budget the growth would pass.
pub fn check_budgets(ctx: &Context, set: &BackendSet, budgets: &Budgets, growth: &BufferGrowth<'_>) -> Result<()> {
    if !budgets.any() {
        return Ok(());
    }
    let report = memory_report(ctx, set, budgets, growth.bytes_after, growth.own_buffers);
    match report.backends.iter().find(|b| !b.fits()) {
        None => Ok(()),
        Some(b) => Err(Error::BudgetExceeded {
            device: b.device.clone(),
            needed: b.total(),
            budget: b.budget.unwrap_or(0),
            compute: b.compute,
            held: b.held,
        }),
    }
}
