//! The product of repacked weights with F32 columns, for one matrix or for
//! several matrices that read the same columns (a fused group's Q/K/V):
//! the columns are quantized once to the weights' dot partner and put in
//! the kernels' column form ([`ColumnLayout`]), then the matrices' row
//! groups (and, when there are few, ranges of columns) are split over the
//! threads, one kernel call per task. One path for every batch size: the
//! kernels take up to a handful of columns per pass over a block of weights,
//! so a batch reads its weights once per handful, and one column streams
//! them.

use std::ops::Range;

use gantry_engine::quant::QuantBlock;
use gantry_engine::{DType, Error, Result};

use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout, RepackType, Repacked, groups, with_repack_type};
use super::scalar;
use crate::HomeRanges;
use crate::jobs::{JobSystem, run_tasks};
use crate::parallel::SendPtr;
use crate::quant::Isa;
use crate::quant::MAX_SHARED;
use crate::quant::mul_mat::{
    ALIGN, Columns, ColumnsMut, MIN_PARALLEL_QUANT, err, on_jobs, shared_weights, span, worth_threads,
};
use crate::quant::weight::ActBlock;

/// A repacked weight matrix: `m` rows of `k` values of `dtype` in the
/// layout of [`super::repack_matrix`].
#[derive(Debug, Clone, Copy)]
pub struct RepackedMatrix<'a> {
    /// The weights' type (one that [`super::repacks`]).
    pub dtype: DType,
    /// The repacked bytes ([`super::repacked_size`]`(dtype, k, m)` at least).
    pub data: &'a [u8],
    /// Values per row.
    pub k: usize,
    /// Rows.
    pub m: usize,
}

/// Tasks per thread: a few, so a thread that starts late takes fewer. Each
/// thread takes its own contiguous range of them first ([`HomeRanges`]), so
/// that it streams one run of weights rather than every other task's.
const TASKS_PER_THREAD: usize = 4;

/// One kernel call: row groups `groups` of one repacked matrix times the
/// prepared columns `cols`.
///
/// Its contract, which every kernel relies on: `data` holds the matrix's
/// groups (`layout.bytes` each) up to `groups.end`; `columns` holds the
/// prepared columns (`col_layout.bytes` each, `col_layout.nb ==
/// layout.nb`) up to `cols.end`; `dst` holds, for every column `j` of
/// `cols`, the matrix's `m` results at `j · dst_stride`, and this job alone
/// writes rows `16·groups` of those columns.
pub(crate) struct Job {
    pub data: *const u8,
    pub layout: GroupLayout,
    pub m: usize,
    pub groups: Range<usize>,
    pub columns: *const u8,
    pub col_layout: ColumnLayout,
    pub cols: Range<usize>,
    pub dst: *mut f32,
    pub dst_stride: usize,
}

/// One half-group pass of an AVX2 path: `(job, group, half, first column,
/// prefetch)`, for [`Job::in_half_passes`].
pub type HalfPass = unsafe fn(&Job, usize, usize, usize, bool);

impl Job {
    /// Every group of the job times every column, in passes of at most `N`
    /// columns sized evenly (9 columns in passes of 8 are 5 + 4, not 8 + 1),
    /// one call of `pass[columns - 1]` per group and pass; the first pass of
    /// a group prefetches, later ones find the group in cache. Shared by
    /// the AVX-512 paths, whose entry points take up to `N` columns.
    ///
    /// # Safety
    /// As [`Job`] says, and the CPU has what each `pass` needs.
    #[inline]
    pub unsafe fn in_passes<const N: usize>(&self, pass: [unsafe fn(&Job, usize, usize, bool); N]) {
        let passes = self.cols.len().div_ceil(N);
        for g in self.groups.clone() {
            let mut c0 = self.cols.start;
            for p in 0..passes {
                // Pass p takes an even share of what is left (at most N).
                let cn = (self.cols.end - c0).div_ceil(passes - p);
                // SAFETY: the caller's contract; columns c0 .. c0 + cn are the job's.
                unsafe { pass[cn - 1](self, g, c0, p == 0) };
                c0 += cn;
            }
        }
    }

    /// Every group of the job times every column as [`Job::in_passes`],
    /// but half a group (`half_rows` rows) at a time: one call of
    /// `pass[columns - 1](job, g, half, c0, prefetch)` per group, half and
    /// pass; only a group's first half and pass prefetches. Shared by the
    /// AVX2 paths, whose registers hold half a group's rows.
    ///
    /// # Safety
    /// As [`Job`] says, and the CPU has what each `pass` needs.
    #[inline]
    pub unsafe fn in_half_passes<const N: usize>(&self, half_rows: usize, pass: [HalfPass; N]) {
        let passes = self.cols.len().div_ceil(N);
        for g in self.groups.clone() {
            for half in 0..self.rows_of(g).div_ceil(half_rows) {
                let mut c0 = self.cols.start;
                for p in 0..passes {
                    let cn = (self.cols.end - c0).div_ceil(passes - p);
                    // The first pass over the group streams it in; the others find it in cache.
                    // SAFETY: the caller's contract; columns c0 .. c0 + cn are the job's.
                    unsafe { pass[cn - 1](self, g, half, c0, half == 0 && p == 0) };
                    c0 += cn;
                }
            }
        }
    }

    /// Rows of group `g` that exist (the last group may be short).
    #[inline]
    pub fn rows_of(&self, g: usize) -> usize {
        (self.m - GROUP_ROWS * g).min(GROUP_ROWS)
    }

    /// The prepared column `j`.
    #[inline]
    pub fn col(&self, j: usize) -> *const u8 {
        self.columns.wrapping_add(j * self.col_layout.bytes)
    }

    /// Where row `16g` of column `j`'s result goes.
    #[inline]
    pub fn out(&self, g: usize, j: usize) -> *mut f32 {
        self.dst.wrapping_add(j * self.dst_stride + GROUP_ROWS * g)
    }
}

/// Byte sizes of the driver's scratch regions.
struct Scratch {
    /// One column quantized to the dot partner.
    act_row: usize,
    /// One prepared column.
    col: ColumnLayout,
}

impl Scratch {
    fn new<R: Repacked>(k: usize) -> Scratch {
        let act_row = (k / <R::Act as QuantBlock>::ELEMS * size_of::<R::Act>()).next_multiple_of(ALIGN);
        Scratch { act_row, col: R::column_layout(k) }
    }

    fn size(&self, n: usize) -> usize {
        ALIGN + n * (self.act_row + self.col.bytes)
    }
}

/// Scratch bytes [`repacked_mul_mat`] needs for `n` columns of `k` values
/// of `dtype` weights (whatever the thread count).
pub fn repacked_scratch_size(dtype: DType, k: usize, n: usize) -> Result<usize> {
    fn size<R: Repacked>(k: usize, n: usize) -> usize {
        Scratch::new::<R>(k).size(n)
    }
    with_repack_type!(dtype, size(k, n))
        .ok_or_else(|| Error::UnsupportedDType { what: "repacked MUL_MAT weights".into(), dtype })
}

/// `dsts[i][j·stride + r] = row r of ws[i] · column j of src1` for every
/// matrix `i` (1 to [`MAX_SHARED`], one dtype, one `k`), on the fastest
/// path, split over the tasks of `jobs`; `src1` is quantized once for all.
/// `scratch` must hold [`repacked_scratch_size`]`(dtype, k, src1.n)` bytes;
/// nothing is allocated.
pub fn repacked_mul_mat(
    ws: &[RepackedMatrix<'_>],
    src1: Columns<'_>,
    dsts: &mut [ColumnsMut<'_>],
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    repacked_mul_mat_on(Isa::best(), ws, src1, dsts, scratch, jobs)
}

/// [`repacked_mul_mat`] on the path `isa` (one this CPU has).
pub fn repacked_mul_mat_on(
    isa: Isa,
    ws: &[RepackedMatrix<'_>],
    src1: Columns<'_>,
    dsts: &mut [ColumnsMut<'_>],
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    let weights = ws.iter().map(|w| (w.dtype, w.k));
    let Some((dtype, _)) = shared_weights("a repacked product", weights, dsts.len())? else { return Ok(()) };
    with_repack_type!(dtype, run(isa, ws, src1, dsts, scratch, jobs))
        .ok_or_else(|| Error::UnsupportedDType { what: "repacked MUL_MAT weights".into(), dtype })?
}

/// Checks every operand of a product against what it must hold.
fn check(
    layout: &GroupLayout,
    ws: &[RepackedMatrix<'_>],
    src1: &Columns<'_>,
    dsts: &[ColumnsMut<'_>],
    scratch: usize,
    need: usize,
) -> Result<()> {
    let k = ws[0].k;
    for (w, dst) in ws.iter().zip(dsts) {
        let bytes = groups(w.m).checked_mul(layout.bytes);
        if bytes.is_none_or(|b| b > w.data.len()) {
            return Err(err(format!(
                "repacked {} weights: {} rows of {k} values do not fit in {} bytes",
                w.dtype,
                w.m,
                w.data.len()
            )));
        }
        if (src1.n > 1 && dst.stride < w.m) || span(src1.n, dst.stride, w.m).is_none_or(|s| s > dst.data.len()) {
            return Err(err(format!(
                "{} result columns of {} rows with stride {} do not fit in {} values",
                src1.n,
                w.m,
                dst.stride,
                dst.data.len()
            )));
        }
    }
    if (src1.n > 1 && src1.stride < k) || span(src1.n, src1.stride, k).is_none_or(|s| s > src1.data.len()) {
        return Err(err(format!(
            "{} columns of {k} values with stride {} do not fit in {} values",
            src1.n,
            src1.stride,
            src1.data.len()
        )));
    }
    if scratch < need {
        return Err(err(format!("scratch of {scratch} bytes, {need} needed")));
    }
    Ok(())
}

fn run<R: Repacked>(
    isa: Isa,
    ws: &[RepackedMatrix<'_>],
    src1: Columns<'_>,
    dsts: &mut [ColumnsMut<'_>],
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    let (k, n) = (ws[0].k, src1.n);
    let layout = R::group_layout(k)
        .ok_or_else(|| err(format!("repacked {} weights of {k} values per row are not whole blocks", ws[0].dtype)))?;
    let sizes = Scratch::new::<R>(k);
    check(&layout, ws, &src1, dsts, scratch.len(), sizes.size(n))?;
    let total_groups: usize = ws.iter().map(|w| groups(w.m)).sum();
    if n == 0 || total_groups == 0 {
        return Ok(());
    }
    let total_m: usize = ws.iter().map(|w| w.m).sum();
    let threads = worth_threads(k, total_m, n, jobs.concurrency());
    let skip = scratch.as_ptr().align_offset(ALIGN).min(ALIGN);
    let (acts, cols) = scratch[skip..].split_at_mut(n * sizes.act_row);
    let cols = &mut cols[..n * sizes.col.bytes];
    let act_blocks = k / <R::Act as QuantBlock>::ELEMS;

    // The tasks: each matrix's groups in runs of `per_task`, times column
    // ranges when the groups are too few to keep the threads busy.
    let per_task = total_groups.div_ceil(threads * TASKS_PER_THREAD).max(1);
    let col_tasks = if threads > 1 && total_groups < threads * TASKS_PER_THREAD {
        (threads * TASKS_PER_THREAD).div_ceil(total_groups).min(n.div_ceil(8)).max(1)
    } else {
        1
    };
    let cols_per_task = n.div_ceil(col_tasks);
    let col_tasks = n.div_ceil(cols_per_task);
    let mut first_task = [0usize; MAX_SHARED + 1];
    for (i, w) in ws.iter().enumerate() {
        first_task[i + 1] = first_task[i] + groups(w.m).div_ceil(per_task) * col_tasks;
    }
    let n_tasks = first_task[ws.len()];
    // The results, written by the tasks in disjoint parts (their groups' rows of their columns).
    let mut outs = [(SendPtr(std::ptr::null_mut::<f32>()), 0usize); MAX_SHARED];
    for (o, dst) in outs.iter_mut().zip(dsts.iter_mut()) {
        *o = (SendPtr(dst.data.as_mut_ptr()), dst.stride);
    }

    on_jobs(jobs, threads, || {
        // 1. Every column quantized and prepared once.
        let prepare = |j: usize, act: &mut [u8], col: &mut [u8]| {
            let x = &src1.data[j * src1.stride..j * src1.stride + k];
            let blocks: &mut [R::Act] = bytemuck::cast_slice_mut(&mut act[..act_blocks * size_of::<R::Act>()]);
            R::Act::quantize_on(isa, x, blocks);
            R::prepare_column(isa, blocks, &sizes.col, col);
        };
        if threads > 1 && n * k >= MIN_PARALLEL_QUANT {
            let (act_ptr, col_ptr) = (SendPtr(acts.as_mut_ptr()), SendPtr(cols.as_mut_ptr()));
            let per = n.div_ceil(threads * TASKS_PER_THREAD);
            run_tasks(jobs, n.div_ceil(per), &|t| {
                for j in t * per..((t + 1) * per).min(n) {
                    // SAFETY: `acts` and `cols` hold `n` regions of `act_row`
                    // and `col.bytes` bytes; task t alone touches its columns'.
                    let (act, col) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(act_ptr.get().add(j * sizes.act_row), sizes.act_row),
                            std::slice::from_raw_parts_mut(col_ptr.get().add(j * sizes.col.bytes), sizes.col.bytes),
                        )
                    };
                    prepare(j, act, col);
                }
            });
        } else {
            for (j, (act, col)) in acts.chunks_mut(sizes.act_row).zip(cols.chunks_mut(sizes.col.bytes)).enumerate() {
                prepare(j, act, col);
            }
        }

        // 2. The products.
        let columns = SendPtr(cols.as_mut_ptr());
        let tasks = HomeRanges::new(n_tasks, threads);
        let worker = |home: usize| {
            // `stopped`: a compute told to stop leaves its remaining tasks.
            while let Some(t) = tasks.take(home).filter(|_| !jobs.stopped()) {
                let i = first_task[1..=ws.len()].iter().position(|&end| t < end).unwrap_or(0);
                let local = t - first_task[i];
                let (gt, ct) = (local / col_tasks, local % col_tasks);
                let w = &ws[i];
                let job = Job {
                    data: w.data.as_ptr(),
                    layout,
                    m: w.m,
                    groups: gt * per_task..((gt + 1) * per_task).min(groups(w.m)),
                    columns: columns.get().cast_const(),
                    col_layout: sizes.col,
                    cols: ct * cols_per_task..((ct + 1) * cols_per_task).min(n),
                    dst: outs[i].0.get(),
                    dst_stride: outs[i].1,
                };
                // SAFETY: the job's contract holds: the matrix and the results
                // were checked above, every column is prepared, and task t
                // alone writes its groups' rows of its columns.
                unsafe { R::run_job(isa, &job) };
            }
        };
        if threads > 1 {
            run_tasks(jobs, threads, &worker);
        } else {
            worker(0);
        }
    });
    Ok(())
}

/// Runs `job` on the path `isa`, with the kernels of the 32-value types.
///
/// # Safety
/// As [`Job`] says, and `isa` is a path this CPU has.
pub(super) unsafe fn run_small_job<R: RepackType>(isa: Isa, job: &Job) {
    match isa {
        // SAFETY: the caller's contract.
        Isa::Scalar => unsafe { scalar::run::<R>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; `Isa::Avx2` is only handed out
        // after checking AVX2, FMA and F16C.
        Isa::Avx2 => unsafe { super::avx2::run::<R>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; `Isa::Avx512` is only handed out
        // after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
        Isa::Avx512 => unsafe { super::avx512::run_plain::<R>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; as `Isa::Avx512`, with AVX512_VNNI
        // checked too.
        Isa::Avx512Vnni => unsafe { super::avx512::run_vnni::<R>(job) },
    }
}
