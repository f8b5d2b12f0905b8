//! The quantized matrix product driver: `dst[n][m] = row m of the weights ·
//! row n of src1`, weights in a quantized type, src1 and dst in f32.
//!
//! The activations are quantized once to the weights' dot partner, into the
//! caller's scratch. Then:
//! - few columns (token generation, `N < TILE_MIN_N`): rows of the weights
//!   are split over the threads in small chunks and each (row, column) is one
//!   integer dot product — the weights stream through once, which is what
//!   bounds a matrix-vector product;
//! - more columns (prompt batches): the weights are cut into tiles of
//!   `TILE_ROWS` rows, each unpacked once into signed bytes and f32 group
//!   scales (in the thread's part of the scratch), then multiplied against the
//!   columns by a register-tiled micro-kernel (2 rows × 4 columns), so the
//!   format decoding is paid once per tile rather than once per column.
//!
//! Threads take tasks from a shared counter, one scratch slice per worker,
//! so no task ever allocates. A product too small to pay for waking the
//! pool's threads runs on the calling thread alone; otherwise the whole call
//! is one hand-over to the job system (a rayon pool's, or the host's tasks).

use gantry_engine::quant::QuantBlock;
use gantry_engine::{DType, Error, Result};

use super::Isa;
use super::weight::{ActBlock, ROWS, TileRow, WeightType, with_weight_type};
use crate::TaskCounter;
use crate::jobs::{JobSystem, run_tasks};
use crate::parallel::SendPtr;

/// Columns from which the tiled path is used (on every SIMD path: the
/// AVX-512 ones run the AVX2 micro-kernels, there is no 512-bit tile yet).
pub(super) const TILE_MIN_N: usize = 8;
/// Weight rows per tile of the tiled path.
const TILE_ROWS: usize = 16;
/// Weight rows per task of the dot-product path: its tasks hold a multiple
/// of this (see [`dot_rows_per_task`]).
pub(super) const DOT_ROWS: usize = 16;
/// Tasks per thread of the dot-product path: a few, so a thread that starts
/// late takes fewer, but not many more, since every task is one step on a
/// counter all threads share and its rows' results share cache lines with
/// its neighbours' (tasks of 16 rows, two threads: a 49152-row product took
/// longer on two threads than on one).
const DOT_TASKS_PER_THREAD: usize = 4;
/// Alignment of every scratch region.
pub(super) const ALIGN: usize = 64;
/// Multiply-adds each thread must get for waking another one to pay: the
/// integer kernels do roughly 10^4 multiply-adds per microsecond, so this is
/// a few microseconds of work, about what a wake-up costs. (A thread that
/// wakes late costs the others little: tasks come from a shared counter.)
/// Smaller products run on the calling thread alone.
const MIN_MACS_PER_THREAD: usize = 64 * 1024;
/// Activation values from which columns are quantized in parallel.
pub(super) const MIN_PARALLEL_QUANT: usize = 16 * 1024;

/// A quantized weight matrix of `m` rows of `k` values; row `r` starts at
/// byte `r · row_stride` of `data`.
#[derive(Debug, Clone, Copy)]
pub struct QuantMatrix<'a> {
    /// The weights' type (Q4_0 … Q6_K).
    pub dtype: DType,
    /// The weights' bytes.
    pub data: &'a [u8],
    /// Bytes from one row to the next (at least the row size).
    pub row_stride: usize,
    /// Values per row (a multiple of the block size).
    pub k: usize,
    /// Rows.
    pub m: usize,
}

fn round_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// Byte sizes of the scratch regions for `W`.
pub(super) struct Layout {
    /// One quantized activation row.
    pub(super) act_row: usize,
    /// One column's chunk scales and group sums (tiled path).
    col_extra: usize,
    /// One worker's unpacked weight tile (tiled path).
    tile: usize,
}

impl Layout {
    pub(super) fn new<W: WeightType>(k: usize) -> Layout {
        let act_row = round_up(k / <W::Act as QuantBlock>::ELEMS * size_of::<W::Act>());
        let row = TileRow::new::<W>(k);
        // Group sums padded with zeros to whole vectors of 8 (see `mins_dot`).
        let col_extra = round_up((k / 32 + row.mins_padded) * 4);
        let tile = TILE_ROWS * row.bytes;
        Layout { act_row, col_extra, tile }
    }

    pub(super) fn size(&self, n: usize, threads: usize) -> usize {
        ALIGN + n * (self.act_row + self.col_extra) + threads * self.tile
    }
}

/// Scratch bytes [`quant_mul_mat`] needs for `n` columns of `k` values of
/// `dtype` weights on a pool of `threads` threads.
pub fn quant_mul_mat_scratch_size(dtype: DType, k: usize, n: usize, threads: usize) -> Result<usize> {
    fn size<W: WeightType>(k: usize, n: usize, threads: usize) -> usize {
        Layout::new::<W>(k).size(n, threads)
    }
    with_weight_type!(dtype, size(k, n, threads))
        .ok_or_else(|| Error::UnsupportedDType { what: "quantized MUL_MAT weights".into(), dtype })
}

/// The activations of a product: `n` columns of `k` values (the weights'
/// row length), column `j` starting at `data[j * stride]`.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    /// The values.
    pub data: &'a [f32],
    /// Distance between column starts, in values.
    pub stride: usize,
    /// Number of columns.
    pub n: usize,
}

/// The result of a product: column `j` (one value per weight row) written
/// from `data[j * stride]`.
#[derive(Debug)]
pub struct ColumnsMut<'a> {
    /// The values.
    pub data: &'a mut [f32],
    /// Distance between column starts, in values.
    pub stride: usize,
}

/// `dst[j·dst.stride + i] = Σ_t w[i][t] · src1[j·src1.stride + t]` for rows
/// `i < w.m` and columns `j < src1.n`, on the fastest path, split over
/// the tasks of `jobs`.
///
/// `scratch` must hold [`quant_mul_mat_scratch_size`]`(w.dtype, w.k, n,
/// jobs.concurrency())` bytes; nothing is allocated.
pub fn quant_mul_mat(
    w: &QuantMatrix<'_>,
    src1: Columns<'_>,
    dst: ColumnsMut<'_>,
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    quant_mul_mat_on(Isa::best(), w, src1, dst, scratch, jobs)
}

/// [`quant_mul_mat`] on the path `isa`.
pub fn quant_mul_mat_on(
    isa: Isa,
    w: &QuantMatrix<'_>,
    src1: Columns<'_>,
    dst: ColumnsMut<'_>,
    scratch: &mut [u8],
    jobs: &dyn JobSystem,
) -> Result<()> {
    let Columns { data: src1, stride: src1_stride, n } = src1;
    let ColumnsMut { data: dst, stride: dst_stride } = dst;
    let args = Args { isa, w, src1, src1_stride, n, dst_stride, jobs };
    with_weight_type!(w.dtype, run(&args, dst, scratch))
        .ok_or_else(|| Error::UnsupportedDType { what: "quantized MUL_MAT weights".into(), dtype: w.dtype })?
}

/// One product's operands, as the driver and [`check`] read them.
pub(super) struct Args<'a, 'b> {
    pub(super) isa: Isa,
    pub(super) w: &'a QuantMatrix<'b>,
    pub(super) src1: &'a [f32],
    pub(super) src1_stride: usize,
    pub(super) n: usize,
    pub(super) dst_stride: usize,
    pub(super) jobs: &'a dyn JobSystem,
}

/// The dtype and row length a group of products shares, after checking
/// the group: 1 to [`super::MAX_SHARED`] matrices (`(dtype, k)` each), one
/// dtype and one `k` among them, and as many results. `None` for no
/// matrices. `what` names the product in messages ("a shared product").
pub(super) fn shared_weights(
    what: &str,
    matrices: impl ExactSizeIterator<Item = (DType, usize)> + Clone,
    results: usize,
) -> Result<Option<(DType, usize)>> {
    let max = super::MAX_SHARED;
    let Some(first) = matrices.clone().next() else { return Ok(None) };
    if matrices.len() > max || matrices.len() != results {
        return Err(err(format!("{what} takes 1 to {max} matrices and as many results")));
    }
    if let Some((dtype, k)) = matrices.into_iter().find(|&w| w != first) {
        return Err(err(format!("{what}'s weights differ: {dtype} of {k} values beside {} of {}", first.0, first.1)));
    }
    Ok(Some(first))
}

pub(super) fn err(reason: String) -> Error {
    Error::InvalidOp { op: "MUL_MAT", reason }
}

/// Bytes a strided 2-d region needs: `rows − 1` strides plus one row.
pub(super) fn span(rows: usize, stride: usize, row: usize) -> Option<usize> {
    if rows == 0 { Some(0) } else { (rows - 1).checked_mul(stride)?.checked_add(row) }
}

/// Checks that `w`, `args`' columns, a result of `dst_len` values with
/// `args.dst_stride` and a scratch of `scratch_len` bytes fit one product;
/// returns the bytes of one weight row. (The shared product checks each of
/// its matrices with it.)
pub(super) fn check(
    args: &Args<'_, '_>,
    dst_len: usize,
    scratch_len: usize,
    layout: &Layout,
    bs: usize,
) -> Result<usize> {
    let w = args.w;
    let row_bytes = w.dtype.row_size(w.k).filter(|_| w.k.is_multiple_of(bs)).ok_or_else(|| {
        err(format!("weights of {} values per row are not a whole number of {} blocks", w.k, w.dtype))
    })?;
    if w.row_stride < row_bytes || span(w.m, w.row_stride, row_bytes).is_none_or(|s| s > w.data.len()) {
        return Err(err(format!(
            "{} weights: {} rows of {row_bytes} bytes with stride {} do not fit in {} bytes",
            w.dtype,
            w.m,
            w.row_stride,
            w.data.len()
        )));
    }
    if args.src1_stride < w.k || span(args.n, args.src1_stride, w.k).is_none_or(|s| s > args.src1.len()) {
        return Err(err(format!(
            "src1: {} rows of {} values with stride {} do not fit in {} values",
            args.n,
            w.k,
            args.src1_stride,
            args.src1.len()
        )));
    }
    if args.dst_stride < w.m || span(args.n, args.dst_stride, w.m).is_none_or(|s| s > dst_len) {
        return Err(err(format!(
            "dst: {} rows of {} values with stride {} do not fit in {dst_len} values",
            args.n, w.m, args.dst_stride
        )));
    }
    let need = layout.size(args.n, args.jobs.concurrency());
    if scratch_len < need {
        return Err(err(format!("scratch holds {scratch_len} bytes, {need} are needed")));
    }
    Ok(row_bytes)
}

/// A pointer that tasks share to write disjoint parts of `dst`.
#[derive(Clone, Copy)]
pub(super) struct DstPtr(pub(super) *mut f32);
// SAFETY: every task writes a set of (row, column) elements no other task writes.
unsafe impl Send for DstPtr {}
// SAFETY: as above.
unsafe impl Sync for DstPtr {}

impl DstPtr {
    /// Writes element `i`.
    ///
    /// # Safety
    /// `i` is inside dst and no other thread writes it.
    unsafe fn write(self, i: usize, v: f32) {
        // SAFETY: the caller's contract.
        unsafe { *self.0.add(i) = v };
    }
}

/// How many of `max` threads a product of `k × m` weights by `n` columns is
/// worth (at least one: the calling thread).
pub(super) fn worth_threads(k: usize, m: usize, n: usize, max: usize) -> usize {
    let macs = k.saturating_mul(m).saturating_mul(n);
    (macs / MIN_MACS_PER_THREAD).clamp(1, max.max(1))
}

/// Rows per task of the dot-product path for `m` rows on `threads` threads:
/// about [`DOT_TASKS_PER_THREAD`] tasks per thread, a multiple of
/// [`DOT_ROWS`] rows each.
pub(super) fn dot_rows_per_task(m: usize, threads: usize) -> usize {
    m.div_ceil(threads.max(1) * DOT_TASKS_PER_THREAD).next_multiple_of(DOT_ROWS).max(DOT_ROWS)
}

/// Runs `f` where the job system runs work best (inside a rayon pool: one
/// hand-over for both steps) when several threads work, on the calling
/// thread otherwise (no wake-up, no hand-over for a product that is too small).
pub(super) fn on_jobs(jobs: &dyn JobSystem, threads: usize, mut f: impl FnMut() + Send) {
    if threads > 1 { jobs.enter(&mut f) } else { f() }
}

/// Weight rows `rows` times `n` quantized columns on the dot-product path:
/// whole groups of rows through the several-row kernel, the rest one by one.
///
/// # Safety
/// Every (row, column) of `rows` × `0..n` is inside the result `out`
/// (column `j` at `j · dst_stride`) and no other task writes it.
pub(super) unsafe fn dot_task<'w, 'a, W: WeightType>(
    isa: Isa,
    weights: &dyn Fn(usize) -> &'w [W::Block],
    act_row: &dyn Fn(usize) -> &'a [W::Act],
    rows: std::ops::Range<usize>,
    n: usize,
    (out, dst_stride): (DstPtr, usize),
) {
    let grouped = rows.start + rows.len() / ROWS * ROWS;
    for r in (rows.start..grouped).step_by(ROWS) {
        let x: [&[W::Block]; ROWS] = std::array::from_fn(|i| weights(r + i));
        for j in 0..n {
            for (i, v) in W::dot_rows(isa, x, act_row(j)).into_iter().enumerate() {
                // SAFETY: (r + i, j) is inside dst and this task's (the caller's contract).
                unsafe { out.write(j * dst_stride + r + i, v) };
            }
        }
    }
    for r in grouped..rows.end {
        let x = weights(r);
        for j in 0..n {
            let v = W::dot(isa, x, act_row(j));
            // SAFETY: (r, j) is inside dst and this task's (the caller's contract).
            unsafe { out.write(j * dst_stride + r, v) };
        }
    }
}

fn run<W: WeightType>(args: &Args<'_, '_>, dst: &mut [f32], scratch: &mut [u8]) -> Result<()> {
    let layout = Layout::new::<W>(args.w.k);
    check(args, dst.len(), scratch.len(), &layout, <W::Block as QuantBlock>::ELEMS)?;
    let (w, n, k) = (args.w, args.n, args.w.k);
    if w.m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        // Empty dot products.
        for j in 0..n {
            dst[j * args.dst_stride..j * args.dst_stride + w.m].fill(0.0);
        }
        return Ok(());
    }
    let threads = worth_threads(k, w.m, n, args.jobs.concurrency());
    let skip = scratch.as_ptr().align_offset(ALIGN).min(ALIGN);
    let scratch = &mut scratch[skip..];
    let (acts, rest) = scratch.split_at_mut(n * layout.act_row);
    let (extras, tiles) = rest.split_at_mut(n * layout.col_extra);
    let tiles = &mut tiles[..threads * layout.tile];
    let act_blocks = k / <W::Act as QuantBlock>::ELEMS;
    let row_bytes = w.dtype.row_size(k).unwrap_or(0);
    let tiled = n >= TILE_MIN_N && args.isa != Isa::Scalar;

    // One hand-over to the pool for both steps (none when one thread is worth it).
    on_jobs(args.jobs, threads, || {
        // 1. Quantize every column of src1 once (and, for the tiled path, its chunk scales and group sums).
        let quantize_column = |(j, (act, extra)): (usize, (&mut [u8], &mut [u8]))| {
            let x = &args.src1[j * args.src1_stride..j * args.src1_stride + k];
            let blocks: &mut [W::Act] = bytemuck::cast_slice_mut(&mut act[..act_blocks * size_of::<W::Act>()]);
            W::Act::quantize_on(args.isa, x, blocks);
            if tiled {
                let extra: &mut [f32] = bytemuck::cast_slice_mut(extra);
                let (scales, sums) = extra.split_at_mut(k / 32);
                for (c, s) in scales.iter_mut().enumerate() {
                    *s = W::Act::chunk_scale(blocks, c);
                }
                let groups = k.checked_div(W::MIN_GROUP).unwrap_or(0);
                for (g, s) in sums[..groups].iter_mut().enumerate() {
                    *s = W::Act::group_sum(blocks, g * W::MIN_GROUP, W::MIN_GROUP);
                }
                sums[groups..groups.next_multiple_of(8)].fill(0.0);
            }
        };
        if threads > 1 && n * k >= MIN_PARALLEL_QUANT {
            let (act_ptr, extra_ptr) = (SendPtr(acts.as_mut_ptr()), SendPtr(extras.as_mut_ptr()));
            let per_task = n.div_ceil(threads * 4);
            run_tasks(args.jobs, n.div_ceil(per_task), &|t| {
                for j in t * per_task..((t + 1) * per_task).min(n) {
                    // SAFETY: `acts` and `extras` hold `n` rows of `act_row` and
                    // `col_extra` bytes; task `t` alone touches the rows of its columns.
                    let (act, extra) = unsafe {
                        (
                            std::slice::from_raw_parts_mut(act_ptr.get().add(j * layout.act_row), layout.act_row),
                            std::slice::from_raw_parts_mut(extra_ptr.get().add(j * layout.col_extra), layout.col_extra),
                        )
                    };
                    quantize_column((j, (act, extra)));
                }
            });
        } else {
            acts.chunks_mut(layout.act_row)
                .zip(extras.chunks_mut(layout.col_extra))
                .enumerate()
                .for_each(quantize_column);
        }

        // 2. The products.
        let acts: &[u8] = acts;
        let extras: &[u8] = extras;
        let weights =
            |r: usize| -> &[W::Block] { bytemuck::cast_slice(&w.data[r * w.row_stride..r * w.row_stride + row_bytes]) };
        let act_row = |j: usize| -> &[W::Act] {
            bytemuck::cast_slice(&acts[j * layout.act_row..j * layout.act_row + act_blocks * size_of::<W::Act>()])
        };
        let out = DstPtr(dst.as_mut_ptr());

        if !tiled {
            let per_task = dot_rows_per_task(w.m, threads);
            let tasks = TaskCounter::new(w.m.div_ceil(per_task));
            let worker = |_: usize| {
                // `stopped`: a compute told to stop leaves its remaining tasks.
                while let Some(t) = tasks.take().filter(|_| !args.jobs.stopped()) {
                    let rows = t * per_task..((t + 1) * per_task).min(w.m);
                    // SAFETY: the rows are inside dst (checked) and belong to this task only.
                    unsafe { dot_task::<W>(args.isa, &weights, &act_row, rows, n, (out, args.dst_stride)) };
                }
            };
            if threads > 1 {
                run_tasks(args.jobs, threads, &worker);
            } else {
                worker(0);
            }
            return;
        }

        #[cfg(target_arch = "x86_64")]
        {
            let row_tiles = w.m.div_ceil(TILE_ROWS);
            // Split columns too when there are few row tiles for the threads.
            let col_tiles = (4 * threads).div_ceil(row_tiles).clamp(1, n.div_ceil(4));
            let cols_per_tile = n.div_ceil(col_tiles).div_ceil(4) * 4;
            let col_tiles = n.div_ceil(cols_per_tile);
            let tasks = TaskCounter::new(row_tiles * col_tiles);
            let extra_col = |j: usize| -> &[f32] {
                bytemuck::cast_slice(&extras[j * layout.col_extra..(j + 1) * layout.col_extra])
            };
            let ctx = TileCtx { isa: args.isa, k, dst_stride: args.dst_stride };
            let worker = |tile: &mut [u8]| {
                // `stopped`: a compute told to stop leaves its remaining tasks.
                while let Some(t) = tasks.take().filter(|_| !args.jobs.stopped()) {
                    let (rt, ct) = (t / col_tiles, t % col_tiles);
                    let rows = rt * TILE_ROWS..((rt + 1) * TILE_ROWS).min(w.m);
                    let cols = ct * cols_per_tile..((ct + 1) * cols_per_tile).min(n);
                    // SAFETY: tiled implies a SIMD `Isa`, each of which was handed
                    // out after checking AVX2/FMA/F16C (the AVX-512 ones include
                    // them); the task's (rows, cols) of dst are its own.
                    unsafe { tile_task::<W>(&ctx, tile, rows, cols, &weights, &act_row, &extra_col, out) };
                }
            };
            if threads > 1 {
                let tiles_ptr = SendPtr(tiles.as_mut_ptr());
                run_tasks(args.jobs, threads, &|t| {
                    // SAFETY: `tiles` holds `threads` tiles of `layout.tile` bytes; task `t` alone uses tile `t`.
                    worker(unsafe { std::slice::from_raw_parts_mut(tiles_ptr.get().add(t * layout.tile), layout.tile) })
                });
            } else {
                worker(tiles);
            }
        }
    });
    Ok(())
}

#[cfg(target_arch = "x86_64")]
struct TileCtx {
    isa: Isa,
    k: usize,
    dst_stride: usize,
}

/// Unpacks weight rows `rows` into `tile` and multiplies them with columns `cols`.
///
/// # Safety
/// AVX2/FMA/F16C are available, and no other task writes dst at (`rows`, `cols`).
#[cfg(target_arch = "x86_64")]
#[expect(
    clippy::too_many_arguments,
    reason = "one tile task: its rows and columns, the shared tile context and the raw views it reads and writes"
)]
unsafe fn tile_task<'w, 'a, W: WeightType>(
    ctx: &TileCtx,
    tile: &mut [u8],
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    weights: &dyn Fn(usize) -> &'w [W::Block],
    act_row: &dyn Fn(usize) -> &'a [W::Act],
    extra_col: &dyn Fn(usize) -> &'a [f32],
    out: DstPtr,
) {
    use super::tile_avx2::{ARow, KRow, WRow, micro, micro_k, mins_dot};

    let k = ctx.k;
    let layout = TileRow::new::<W>(k);
    let nr = rows.len();
    // Unpack each row into its slot: quants, then scales, super-block scales, mins.
    for (i, r) in rows.clone().enumerate() {
        let slot = &mut tile[i * layout.bytes..(i + 1) * layout.bytes];
        let (q, rest) = slot.split_at_mut(layout.scales);
        let (sc, rest) = rest.split_at_mut(layout.ds - layout.scales);
        let (ds, mins) = rest.split_at_mut(layout.mins - layout.ds);
        let mins: &mut [f32] = bytemuck::cast_slice_mut(&mut mins[..4 * layout.mins_padded]);
        let (mins, pad) = mins.split_at_mut(layout.n_mins);
        pad.fill(0.0);
        if W::INT_K {
            let sc: &mut [i16] = bytemuck::cast_slice_mut(sc);
            let ds: &mut [f32] = bytemuck::cast_slice_mut(&mut ds[..4 * (k / 256)]);
            for (b, blk) in weights(r).iter().enumerate() {
                ds[b] = W::unpack_k(
                    blk,
                    &mut q[256 * b..256 * (b + 1)],
                    &mut sc[128 * b..128 * (b + 1)],
                    &mut mins[16 * b..16 * (b + 1)],
                );
            }
        } else {
            let q: &mut [i8] = bytemuck::cast_slice_mut(q);
            let sc: &mut [f32] = bytemuck::cast_slice_mut(&mut sc[..4 * (k / 16)]);
            W::unpack_row(ctx.isa, weights(r), q, sc, mins);
        }
    }
    let tile: &[u8] = tile;
    let slot = |i: usize| &tile[i * layout.bytes..(i + 1) * layout.bytes];
    let wrow = |i: usize| WRow { q: slot(i).as_ptr().cast(), scale16: slot(i)[layout.scales..].as_ptr().cast() };
    let krow = |i: usize| KRow {
        q: slot(i).as_ptr(),
        sc: slot(i)[layout.scales..].as_ptr().cast(),
        d: slot(i)[layout.ds..].as_ptr().cast(),
    };
    let arow = |j: usize| ARow { blocks: act_row(j).as_ptr().cast(), scale32: extra_col(j).as_ptr() };
    let kcol = |j: usize| act_row(j).as_ptr().cast::<gantry_engine::quant::BlockQ8K>();
    let row_mins = |i: usize| slot(i)[layout.mins..].as_ptr().cast::<f32>();
    let col_sums = |j: usize| extra_col(j)[k / 32..].as_ptr();
    let write = |i: usize, j: usize, v: f32| {
        // SAFETY: (r, j) lies inside dst (checked by the driver) and in this task's tile.
        unsafe { out.write(j * ctx.dst_stride + rows.start + i, v) };
    };

    let mut j = cols.start;
    while j < cols.end {
        let cn = (cols.end - j).min(4);
        let mut i = 0;
        while i < nr {
            let rn = (nr - i).min(2);
            // SAFETY: rows i.. and columns j.. are unpacked / quantized above for
            // all k values, mins and group sums padded with zeros to whole
            // vectors; the CPU has AVX2 (caller's contract); the K form's
            // quants are ≤ 63 and its scales within ±128 (every K-quant's are).
            unsafe {
                macro_rules! go {
                    ($r:literal, $c:literal) => {{
                        let mut res = if W::INT_K {
                            micro_k::<$r, $c>(
                                k / 256,
                                &std::array::from_fn(|x| krow(i + x)),
                                &std::array::from_fn(|y| kcol(j + y)),
                            )
                        } else {
                            let (w, a) = (std::array::from_fn(|x| wrow(i + x)), std::array::from_fn(|y| arow(j + y)));
                            if W::UNSIGNED_Q {
                                micro::<W::Act, true, $r, $c>(k / 32, &w, &a)
                            } else {
                                micro::<W::Act, false, $r, $c>(k / 32, &w, &a)
                            }
                        };
                        if layout.n_mins > 0 {
                            let m = mins_dot::<$r, $c>(
                                layout.mins_padded,
                                &std::array::from_fn(|x| row_mins(i + x)),
                                &std::array::from_fn(|y| col_sums(j + y)),
                            );
                            for x in 0..$r {
                                for y in 0..$c {
                                    res[x][y] += m[x][y];
                                }
                            }
                        }
                        for x in 0..$r {
                            for y in 0..$c {
                                write(i + x, j + y, res[x][y]);
                            }
                        }
                    }};
                }
                match (rn, cn) {
                    (2, 4) => go!(2, 4),
                    (2, 3) => go!(2, 3),
                    (2, 2) => go!(2, 2),
                    (2, _) => go!(2, 1),
                    (_, 4) => go!(1, 4),
                    (_, 3) => go!(1, 3),
                    (_, 2) => go!(1, 2),
                    _ => go!(1, 1),
                }
            }
            i += rn;
        }
        j += cn;
    }
}
