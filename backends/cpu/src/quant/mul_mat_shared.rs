//! Products that share their activations (a decoder's Q/K/V, or gate and
//! up, at batch 1): several quantized weight matrices of one type times the
//! same few columns. The columns are quantized once for all of them, and the
//! rows of every matrix are split over the threads in one dispatch, so the
//! group costs one hand-over to the pool and one wait instead of one per
//! matrix. Only the dot-product path (fewer than `TILE_MIN_N` columns);
//! [`shared_takes`] says when.

use gantry_engine::quant::QuantBlock;
use gantry_engine::{DType, Error, Result};

use super::Isa;
use super::mul_mat::{
    ALIGN, Args, Columns, ColumnsMut, DstPtr, Layout, QuantMatrix, TILE_MIN_N, check, dot_rows_per_task, dot_task, err,
    on_jobs, shared_weights, worth_threads,
};
use super::weight::{ActBlock, WeightType, with_weight_type};
use crate::TaskCounter;
use crate::jobs::{JobSystem, run_tasks};

/// Most matrices one shared product takes.
pub const MAX_SHARED: usize = 4;

/// Whether [`quant_mul_mat_shared`] takes products of `n` columns.
pub fn shared_takes(n: usize) -> bool {
    (1..TILE_MIN_N).contains(&n)
}

/// `dsts[i] = ws[i] · src1` for every matrix `i` (as [`super::quant_mul_mat`]
/// for each), with `src1` quantized once. The matrices must have one dtype
/// and one row length, there must be 1 to [`MAX_SHARED`] of them, and
/// [`shared_takes`]`(src1.n)`. `scratch` must hold
/// [`super::quant_mul_mat_scratch_size`]`(dtype, k, n, jobs.concurrency())`
/// bytes; nothing is allocated.
pub fn quant_mul_mat_shared(
    ws: &[QuantMatrix<'_>],
    src1: Columns<'_>,
    dsts: &mut [ColumnsMut<'_>],
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    quant_mul_mat_shared_on(Isa::best(), ws, src1, dsts, scratch, jobs)
}

/// [`quant_mul_mat_shared`] on the path `isa` (one the CPU has).
pub fn quant_mul_mat_shared_on(
    isa: Isa,
    ws: &[QuantMatrix<'_>],
    src1: Columns<'_>,
    dsts: &mut [ColumnsMut<'_>],
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    let weights = ws.iter().map(|w| (w.dtype, w.k));
    let Some((dtype, _)) = shared_weights("a shared product", weights, dsts.len())? else { return Ok(()) };
    if !shared_takes(src1.n) {
        return Err(err(format!("a shared product takes 1 to {} columns, not {}", TILE_MIN_N - 1, src1.n)));
    }
    with_weight_type!(dtype, run_shared(isa, ws, src1, dsts, scratch, jobs))
        .ok_or_else(|| Error::UnsupportedDType { what: "quantized MUL_MAT weights".into(), dtype })?
}

fn run_shared<W: WeightType>(
    isa: Isa,
    ws: &[QuantMatrix<'_>],
    src1: Columns<'_>,
    dsts: &mut [ColumnsMut<'_>],
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    let (k, n) = (ws[0].k, src1.n);
    let layout = Layout::new::<W>(k);
    let bs = <W::Block as QuantBlock>::ELEMS;
    // Each matrix with its result as one product would check them (same
    // columns and scratch); every matrix has the first one's row length.
    let mut row_bytes = 0;
    for (w, dst) in ws.iter().zip(dsts.iter()) {
        let args = Args { isa, w, src1: src1.data, src1_stride: src1.stride, n, dst_stride: dst.stride, jobs };
        row_bytes = check(&args, dst.data.len(), scratch.len(), &layout, bs)?;
    }
    let total_m: usize = ws.iter().map(|w| w.m).sum();
    if total_m == 0 {
        return Ok(());
    }
    let threads = worth_threads(k, total_m, n, jobs.concurrency());
    let skip = scratch.as_ptr().align_offset(ALIGN).min(ALIGN);
    let acts = &mut scratch[skip..skip + n * layout.act_row];
    let act_blocks = k / <W::Act as QuantBlock>::ELEMS;
    // Where each matrix's tasks start in the shared task numbering.
    let per_task = dot_rows_per_task(total_m, threads);
    let mut first_task = [0usize; MAX_SHARED + 1];
    for (i, w) in ws.iter().enumerate() {
        first_task[i + 1] = first_task[i] + w.m.div_ceil(per_task);
    }
    let n_tasks = first_task[ws.len()];
    let mut outs = [(DstPtr(std::ptr::null_mut()), 0usize); MAX_SHARED];
    for (o, dst) in outs.iter_mut().zip(dsts.iter_mut()) {
        *o = (DstPtr(dst.data.as_mut_ptr()), dst.stride);
    }

    on_jobs(jobs, threads, || {
        // 1. The columns, quantized once (few values: on this thread).
        for (j, act) in acts.chunks_mut(layout.act_row).enumerate() {
            let x = &src1.data[j * src1.stride..j * src1.stride + k];
            let blocks: &mut [W::Act] = bytemuck::cast_slice_mut(&mut act[..act_blocks * size_of::<W::Act>()]);
            <W::Act as ActBlock>::quantize_on(isa, x, blocks);
        }
        let acts: &[u8] = acts;
        let act_row = |j: usize| -> &[W::Act] {
            bytemuck::cast_slice(&acts[j * layout.act_row..j * layout.act_row + act_blocks * size_of::<W::Act>()])
        };
        // 2. Every matrix's rows, one task counter over all of them.
        let tasks = TaskCounter::new(n_tasks);
        let worker = |_: usize| {
            // `stopped`: a compute told to stop leaves its remaining tasks.
            while let Some(t) = tasks.take().filter(|_| !jobs.stopped()) {
                let i = first_task[1..=ws.len()].iter().position(|&end| t < end).unwrap_or(0);
                let w = &ws[i];
                let local = t - first_task[i];
                let rows = local * per_task..((local + 1) * per_task).min(w.m);
                let weights = |r: usize| -> &[W::Block] {
                    bytemuck::cast_slice(&w.data[r * w.row_stride..r * w.row_stride + row_bytes])
                };
                // SAFETY: the rows are inside matrix i's result (checked above)
                // and task t alone writes them.
                unsafe { dot_task::<W>(isa, &weights, &act_row, rows, n, outs[i]) };
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
