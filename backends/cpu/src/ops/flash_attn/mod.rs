//! FLASH_ATTN_EXT: `softmax(Q K^T * scale + slope * mask) V` per query and
//! head in one pass over the keys, with the online softmax (a running
//! maximum, and the sums so far rescaled when it grows), grouped-query
//! broadcast of K and V over heads, ALiBi slopes and logit soft-capping. The
//! result is `[dv, n_head, n_q, ne3]`. The score matrix is never
//! materialised: keys are taken in blocks of [`KV_BLOCK`], and per block
//! the scores first, then one maximum, one vectorized `exp` and one rescale
//! (ggml rescales per key).
//!
//! Two paths, one result (up to float summation order):
//! - `tiled`: prompt batches. A tile of queries and every head that shares
//!   their K/V head are computed together, so each block of keys and values
//!   is converted to f32 once per tile (not once per query and head) and
//!   read from L1 by small register-blocked products. Which blocks each
//!   query sees is read from the mask once per node; a block only a few
//!   rows see (many sequences decoding: each query its own sequence's
//!   blocks) is read in place, only its visible keys scored and only its
//!   weighted keys' values added — on AVX-512 with the rows' sums in
//!   registers (`values_avx512`).
//! - `rows`: one query and head at a time, K and V read in place; for
//!   decoding (a query or a few), and for layouts the tiles do not take
//!   (K and V grouped differently over heads). A query or a few take the
//!   tiles instead when several heads share an F16 K/V head and there are
//!   tiles enough for the threads: a tile's heads then read each K and V
//!   row once, in place.

mod block_map;
mod rows;
#[cfg(target_arch = "x86_64")]
mod scores;
mod tiled;
#[cfg(target_arch = "x86_64")]
mod values_avx512;

use gantry_engine::{Context, DType, Result, TensorDesc, TensorId};

use self::block_map::BlockMap;
use super::bound::Bound;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;
use crate::prefetch::prefetch_l2;
use crate::simd;

/// Keys scored together before their values are accumulated.
const KV_BLOCK: usize = 64;

/// Queries from which the tiled path runs: below, the tile's conversions
/// and transposes cost more than reading K and V in place.
const TILED_MIN_QUERIES: usize = 4;

/// The op's parameters.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Multiplies `Q K^T`.
    pub scale: f32,
    /// ALiBi maximum bias (0 = off).
    pub max_bias: f32,
    /// Logit soft-capping (0 = off).
    pub softcap: f32,
}

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(q), Some(k), Some(v)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1), src_desc(ctx, d, 2)) else {
        return false;
    };
    // Q8_0: a quantized KV cache (`--kv-type q8_0`), rows dequantized as they are read.
    let kv = |t: DType| matches!(t, DType::F32 | DType::F16 | DType::BF16 | DType::Q8_0);
    let mask_ok = match d.srcs[3] {
        None => true,
        Some(_) => src_desc(ctx, d, 3).is_some_and(|m| matches!(m.dtype, DType::F32 | DType::F16)),
    };
    let sinks_ok = match d.srcs[4] {
        None => true,
        Some(_) => src_desc(ctx, d, 4).is_some_and(|s| s.dtype == DType::F32),
    };
    q.dtype == DType::F32 && kv(k.dtype) && kv(v.dtype) && d.dtype == DType::F32 && mask_ok && sinks_ok
}

/// One FLASH_ATTN_EXT node's operands and sizes, checked.
struct Attention {
    q: Bound,
    k: Bound,
    v: Bound,
    mask: Option<Bound>,
    /// One F32 logit per query head joining each softmax (gpt-oss).
    sinks: Option<Bound>,
    dst: Bound,
    /// K row length (= Q's), V row length.
    dk: usize,
    dv: usize,
    /// Queries, heads, batches (Q's dims 1, 2, 3) and keys.
    n_q: usize,
    n_head: usize,
    n_batch: usize,
    n_kv: usize,
    /// Q heads per K head and Q batches per K batch; the same for V.
    rk: [usize; 2],
    rv: [usize; 2],
    /// The scale, with the softcap folded in (ggml's `s = softcap · tanh(qk · scale / softcap)`).
    scale: f32,
    params: Params,
}

impl Attention {
    /// Score of one key before the mask: scaled and soft-capped.
    #[inline]
    fn finish_score(&self, qk: f32) -> f32 {
        let s = qk * self.scale;
        if self.params.softcap != 0.0 { self.params.softcap * s.tanh() } else { s }
    }
}

pub fn compute(ctx: &Context, t: TensorId, d: &TensorDesc, p: Params, par: &Par<'_>) -> Result<()> {
    let att = Attention::bind(ctx, t, d, p)?;
    let map = BlockMap::of(&att);
    // The keys some query sees (whole blocks): decoding after 16 tokens
    // into a cache of 256 cells scores 16 keys, not 256, and the work's
    // split over threads should say so.
    let keys = map.as_ref().map_or(att.n_kv, |m| (m.blocks_seen() * KV_BLOCK).min(att.n_kv));
    let work = |rows: usize| rows * keys * (att.dk + att.dv) * 2;
    // Few queries take the tiles too when several heads share an F16 K/V
    // head: a tile reads each K and V row once for all of them, in place,
    // its scores and values by the AVX-512 kernels where the CPU has them —
    // provided there is a tile for every thread the work is worth. Decoding
    // one token (SmolLM2: 9 heads on 3 K/V heads) after 256 on 2 threads
    // of a Xeon: 12.1 µs a node in 3 tiles against 25.9 in 9 rows.
    let tiles = att.n_batch * (att.n_head / att.rk[0]);
    let rows = att.n_q * att.n_head * att.n_batch;
    let shares_f16_rows = att.rk[0] > 1
        && tiles >= par.threads_for(work(rows))
        && [&att.k, &att.v].iter().all(|t| t.dtype == DType::F16 && t.rows_are_dense());
    if (att.n_q >= TILED_MIN_QUERIES || shares_f16_rows) && att.rk == att.rv && att.rk[0] <= tiled::MAX_ROWS {
        tiled::compute(&att, map.as_ref(), work, par);
    } else {
        rows::compute(&att, work(1), par);
    }
    Ok(())
}

impl Attention {
    /// Binds FLASH_ATTN_EXT node `t` and checks its shapes.
    fn bind(ctx: &Context, t: TensorId, d: &TensorDesc, p: Params) -> Result<Self> {
        let q = Bound::src(ctx, src(ctx, t, d, 0)?)?;
        let k = Bound::src(ctx, src(ctx, t, d, 1)?)?;
        let v = Bound::src(ctx, src(ctx, t, d, 2)?)?;
        let mask = d.srcs[3].map(|m| Bound::src(ctx, m)).transpose()?;
        let sinks = d.srcs[4].map(|s| Bound::src(ctx, s)).transpose()?;
        let dst = Bound::dst(ctx, t)?;
        let (dk, dv, n_q, n_head, n_batch, n_kv) = (q.ne[0], v.ne[0], q.ne[1], q.ne[2], q.ne[3], k.ne[1]);
        let divides = |a: usize, b: usize| b > 0 && a.is_multiple_of(b);
        let mut ok = k.ne[0] == dk
            && v.ne[1] == n_kv
            && divides(n_head, k.ne[2])
            && divides(n_head, v.ne[2])
            && divides(n_batch, k.ne[3])
            && divides(n_batch, v.ne[3])
            && dst.ne == [dv, n_head, n_q, n_batch]
            && dst.rows_are_dense();
        if let Some(s) = &sinks {
            ok &= s.ne == [n_head, 1, 1, 1] && s.dtype == DType::F32;
        }
        if let Some(m) = &mask {
            ok &= m.ne[0] == n_kv && m.ne[1] >= n_q && divides(n_head, m.ne[2]) && divides(n_batch, m.ne[3]);
        }
        if !ok {
            return Err(shape_err(ctx, t, d, format!("Q {:?}, K {:?}, V {:?} into {:?}", q.ne, k.ne, v.ne, dst.ne)));
        }
        let rk = [n_head / k.ne[2], n_batch / k.ne[3]];
        let rv = [n_head / v.ne[2], n_batch / v.ne[3]];
        let scale = if p.softcap != 0.0 { p.scale / p.softcap } else { p.scale };
        Ok(Attention { q, k, v, mask, sinks, dst, dk, dv, n_q, n_head, n_batch, n_kv, rk, rv, scale, params: p })
    }
}

/// Folds head `h`'s attention sink into a row's online softmax: the sink is
/// one more logit with no value, so as a new maximum it rescales what was
/// accumulated, and its weight joins the sum (ggml's FLASH_ATTN_EXT sinks).
#[inline]
fn add_sink(a: &Attention, h: usize, running_max: &mut f32, sum: &mut f64, acc: &mut [f32]) {
    let Some(s) = &a.sinks else { return };
    // SAFETY: h < n_head, the sinks' length (checked when bound).
    let sink = unsafe { s.get(h, 0, 0, 0) };
    if sink > *running_max {
        let rescale = (*running_max - sink).exp();
        simd::scale(acc, rescale);
        *sum *= f64::from(rescale);
        *running_max = sink;
    }
    *sum += f64::from((sink - *running_max).exp());
}

/// Whether a block's scores hold one that no softmax weight comes from: NaN
/// (a NaN in Q or K, a NaN rope factor) or +inf (an overflow). Such a row's
/// result is NaN, as ggml's is, so that the model's non-finite output check
/// reports it; skipping the key as if it were masked gave a finite, wrong
/// answer. One pass of compares without a branch (a masked key's −inf is a
/// weight of 0, not a fault).
#[inline]
fn not_a_weight(scores: &[f32]) -> bool {
    scores.iter().fold(false, |bad, &x| bad | x.is_nan() | (x == f32::INFINITY))
}

/// Mask values `c0..c0 + out.len()` of mask row `[i1, i2, i3]` as f32.
///
/// # Safety
/// The row and columns are within the mask's shape.
#[inline]
unsafe fn load_mask(m: &Bound, c0: usize, [i1, i2, i3]: [usize; 3], out: &mut [f32]) {
    // SAFETY: in range (the caller's contract); dense rows are contiguous values.
    unsafe {
        if m.rows_are_dense() && m.dtype == DType::F16 {
            let p = (m.row(i1, i2, i3) as *const half::f16).add(c0);
            simd::f16_to_f32(std::slice::from_raw_parts(p, out.len()), out);
        } else {
            for (j, o) in out.iter_mut().enumerate() {
                *o = m.get(c0 + j, i1, i2, i3);
            }
        }
    }
}

/// Asks for the K and V rows of keys `c0 .. c0 + block` (K head `kv[0]`,
/// V head `kv[1]`, each `[head, batch]`) to be brought into L2 before
/// their block is read in place. Decoding, the cache is out of every
/// cache by the next token (the weights streamed through in between), and
/// one row asked for at a time leaves each dot waiting on memory; into L1
/// (`T0`) the requests of a whole block found no room and measured no
/// better. Measured on 16 sequences decoding on 2 threads (Zen 4): the
/// in-place dots and value updates fell from 20 % to 11 % of the samples.
///
/// # Safety
/// The keys and heads are within K's and V's shapes.
#[inline]
unsafe fn prefetch_block(a: &Attention, c0: usize, block: usize, [kh, vh]: [[usize; 2]; 2]) {
    // Dense rows only (the cache's layout); a strided row is left to the hardware.
    let bytes = |t: &Bound| if t.rows_are_dense() { t.dtype.row_size(t.ne[0]).unwrap_or(0) } else { 0 };
    let (k_bytes, v_bytes) = (bytes(&a.k), bytes(&a.v));
    for j in c0..c0 + block {
        // SAFETY: in range (the caller's contract).
        let (k_row, v_row) = unsafe { (a.k.row(j, kh[0], kh[1]), a.v.row(j, vh[0], vh[1])) };
        prefetch_l2(k_row, k_bytes, k_row.wrapping_add(k_bytes));
        prefetch_l2(v_row, v_bytes, v_row.wrapping_add(v_bytes));
    }
}

/// Row `[i1, i2, i3]` of K or V (F32, F16, BF16 or Q8_0, any strides) as
/// f32, into `out` (its whole row length).
///
/// # Safety
/// The row is within the tensor's shape; `out.len()` is its row length.
#[inline]
unsafe fn load_kv_row(kv: &Bound, [i1, i2, i3]: [usize; 3], out: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe {
        if kv.dtype == DType::Q8_0 {
            dequantize_q8_0_row(kv.row(i1, i2, i3), out);
        } else {
            kv.load_row(i1, i2, i3, out);
        }
    }
}

/// Dequantizes the Q8_0 row of `out.len()` values starting at `p`.
///
/// # Safety
/// `p` points at `out.len() / 32` whole Q8_0 blocks.
#[inline]
unsafe fn dequantize_q8_0_row(p: *const u8, out: &mut [f32]) {
    let len = DType::Q8_0.row_size(out.len()).unwrap_or(0);
    // SAFETY: the caller's contract: the row's blocks lie at p.
    let bytes = unsafe { std::slice::from_raw_parts(p, len) };
    // The row length is a whole number of blocks (checked when the cache was made).
    let _ = gantry_engine::quant::dequantize_row(DType::Q8_0, bytes, out);
}

#[cfg(test)]
mod tests {
    use gantry_engine::{BufferUsage, SplitMix64};

    use super::*;
    use crate::parallel::PerThreadScratch;

    /// The tiled path and the rows path give the same bits (a far tighter
    /// check than the conformance suite's NMSE): a causal prompt of 70 queries over 20 cached keys, 9 heads
    /// sharing 3 K/V heads, an F16 cache, several query tiles and key blocks.
    /// Runs both paths on `n_q` queries over `n_kv` keys, query `i` seeing
    /// key `j` where `sees(i, j)`, and checks they give the same bits.
    fn check_same_bits(n_q: usize, n_kv: usize, sees: impl Fn(usize, usize) -> bool) {
        check_same_bits_nan(n_q, n_kv, sees, None);
    }

    /// [`check_same_bits`], with query `nan_at.0`'s head `nan_at.1` a row of
    /// NaN: that output row must be NaN on both paths, every other finite.
    fn check_same_bits_nan(
        n_q: usize,
        n_kv: usize,
        sees: impl Fn(usize, usize) -> bool,
        nan_at: Option<(usize, usize)>,
    ) {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let scratch = PerThreadScratch::new(2);
        let par = Par::new(&pool, 2, &scratch);
        let (d, heads, kv_heads) = (64, 9, 3);
        let mut ctx = Context::new();
        let q = ctx.tensor(DType::F32, [d, n_q, heads, 1]).unwrap();
        let k = ctx.tensor(DType::F16, [d, n_kv, kv_heads, 1]).unwrap();
        let v = ctx.tensor(DType::F16, [d, n_kv, kv_heads, 1]).unwrap();
        let m = ctx.tensor(DType::F16, [n_kv, n_q, 1, 1]).unwrap();
        let outs: Vec<TensorId> =
            (0..2).map(|_| ctx.flash_attn_ext(q, k, v, Some(m), 0.125, 0.0, 0.0).unwrap()).collect();
        ctx.alloc_tensors(&[q, k, v, m, outs[0], outs[1]], &crate::buffer_type(), BufferUsage::Any).unwrap();
        let mut qv = SplitMix64::new(1).values(d * n_q * heads, -2.0, 2.0);
        if let Some((i, h)) = nan_at {
            qv[(h * n_q + i) * d] = f32::NAN;
        }
        ctx.set_f32(q, &qv).unwrap();
        for (t, seed) in [(k, 2), (v, 3)] {
            let values: Vec<half::f16> = SplitMix64::new(seed)
                .values(d * n_kv * kv_heads, -2.0, 2.0)
                .into_iter()
                .map(half::f16::from_f32)
                .collect();
            ctx.write_tensor_bytes(t, 0, bytemuck::cast_slice(&values)).unwrap();
        }
        let mask: Vec<half::f16> = (0..n_q)
            .flat_map(|i| (0..n_kv).map(move |j| (i, j)))
            .map(|(i, j)| if sees(i, j) { 0.0 } else { f32::NEG_INFINITY })
            .map(half::f16::from_f32)
            .collect();
        ctx.write_tensor_bytes(m, 0, bytemuck::cast_slice(&mask)).unwrap();
        let p = Params { scale: 0.125, max_bias: 0.0, softcap: 0.0 };
        let bind =
            |ctx: &Context, out: TensorId| Attention::bind(ctx, out, &ctx.desc(out).unwrap().clone(), p).unwrap();
        rows::compute(&bind(&ctx, outs[1]), n_kv * 256, &par);
        let rows = ctx.read_f32(outs[1]).unwrap();
        for (r, row) in rows.chunks(d).enumerate() {
            // Output row r is query r / heads, head r % heads.
            if nan_at == Some((r / heads, r % heads)) {
                assert!(row.iter().all(|v| v.is_nan()), "the NaN row {r} is not NaN");
            } else {
                assert!(row.iter().all(|v| v.is_finite()), "row {r}");
            }
        }
        assert!(rows.iter().any(|&v| v != 0.0));
        let rows: Vec<u32> = rows.iter().map(|v| v.to_bits()).collect();
        // The tiles on every path this CPU has (AVX-512 adds values its own way).
        for isa in crate::isa::Isa::available() {
            ctx.set_f32(outs[0], &vec![f32::NAN; rows.len()]).unwrap();
            let a = bind(&ctx, outs[0]);
            let map = BlockMap::of(&a);
            tiled::compute_on(&a, map.as_ref(), |rows| rows * n_kv * 256, &par, isa);
            let tiles: Vec<u32> = ctx.read_f32(outs[0]).unwrap().iter().map(|v| v.to_bits()).collect();
            assert_eq!(tiles, rows, "{isa:?}");
        }
    }

    #[test]
    fn tiles_and_rows_give_the_same_bits() {
        // A prompt batch: query i sees the 20 cached keys and itself and the
        // queries before it (blocks shared by a tile's rows: converted once).
        check_same_bits(70, 90, |i, j| j <= 20 + i);
        // 16 sequences decoding a token each, sequence s in the cache's
        // block s (a tile's block seen by one query's heads: read in place),
        // then a last block holding all of them interleaved (converted).
        check_same_bits(16, 16 * KV_BLOCK + 40, |i, j| match j / KV_BLOCK {
            16 => j % 16 == i,
            b => b == i && j % KV_BLOCK <= 10 + 3 * i,
        });
        // One sequence decoding: a query's 3 heads share each block, read in
        // place; an odd number of keys seen in some blocks (the AVX-512
        // scores take keys in pairs), none in one.
        check_same_bits(1, 5 * KV_BLOCK + 7, |_, j| j / KV_BLOCK != 2 && j % 7 != 3);
    }

    /// A NaN in a query (a NaN weight or rope factor upstream) makes its
    /// scores NaN: its output row is NaN on both paths, as ggml's, and the
    /// other rows are untouched; it used to be skipped like a masked key.
    #[test]
    fn nan_scores_give_a_nan_row_not_a_finite_one() {
        check_same_bits_nan(70, 90, |i, j| j <= 20 + i, Some((33, 4)));
        check_same_bits_nan(1, 5 * KV_BLOCK + 7, |_, j| j % 7 != 3, Some((0, 2)));
    }
}
