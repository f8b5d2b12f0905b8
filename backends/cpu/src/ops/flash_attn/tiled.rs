//! Flash attention over tiles of queries: a tile is up to [`QUERY_TILE_ROWS`]
//! (query, head) rows that read the same K/V head — a run of queries times
//! every Q head of one grouped-query group — so each block of
//! [`KV_BLOCK`] keys and values is converted to f32 once per tile (not once
//! per query and head), and the block's scores and weighted values are
//! computed from L1.
//!
//! The arithmetic is the rows path's, operation for operation (the same dot
//! product per score, the same online softmax, values accumulated key by
//! key with the same fused multiply-adds), so both paths give the same bits:
//! a model's logits do not depend on which one ran. (That matters more than
//! it sounds: with 8-bit activations between layers, a last-bit change in
//! attention moves a 135M model's worst-position KL from the exact forward
//! by ±20 %.)
//!
//! Where every row of a tile is masked out of a block (causal prompts: the
//! keys after the tile's last query; other sequences; beyond a window), the
//! block is skipped before its keys are converted.

use half::f16;

use gantry_engine::DType;

use super::super::softmax::alibi_slope;
use super::block_map::{BlockMap, first_bits};
use super::rows::{k_dot, v_axpy};
use super::{Attention, KV_BLOCK, add_sink, load_kv_row, load_mask, prefetch_block};
#[cfg(target_arch = "x86_64")]
use super::{scores, values_avx512};
use crate::isa::Isa;
use crate::parallel::Par;
use crate::simd;
use crate::simd::multiversion;
use crate::simd::multiversion::madd;

/// Rows (query × head) a tile aims for: enough to pay for converting a key
/// block, few enough that the tile's scores, queries and sums stay in L1/L2.
const QUERY_TILE_ROWS: usize = 32;

/// The most rows a tile may have: one grouped-query group of up to this
/// many heads still fits one tile (wider groups take the rows path).
pub(super) const MAX_ROWS: usize = 64;

/// Most rows of a tile that see a key block for the block to be read in
/// place — each row's scores and value updates reading the K/V rows as the
/// rows path does — rather than converted to f32 once for the tile. A block
/// only one query's heads see (decoding many sequences: each query sees its
/// own sequence's blocks) costs less read in place; a block a prompt's
/// queries share, converted once. Both give the same bits.
const IN_PLACE_MAX_ROWS: usize = 4;

/// Rows that read a block in place together: with an F16 cache, the heads
/// of one query that see a block score each K row, and add each V row,
/// in one pass over it for all of them ([`simd::dot_f16_each`],
/// [`simd::axpy_f16_each`]: each row's bits as if alone). Decoding many
/// sequences, a key is then converted once for its 3 heads, not 3 times.
struct SharedRows {
    rows: [usize; IN_PLACE_MAX_ROWS],
    len: usize,
}

impl SharedRows {
    /// The rows of `sees` that see the block (at most [`IN_PLACE_MAX_ROWS`]).
    fn seeing(sees: &[bool]) -> Self {
        let mut shared = SharedRows { rows: [0; IN_PLACE_MAX_ROWS], len: 0 };
        for r in (0..sees.len()).filter(|&r| sees[r]).take(IN_PLACE_MAX_ROWS) {
            shared.rows[shared.len] = r;
            shared.len += 1;
        }
        shared
    }

    /// The rows.
    fn rows(&self) -> &[usize] {
        &self.rows[..self.len]
    }

    /// [`SharedRows::add_value`] for every key of `live` (bits from key
    /// `first[0]` of K/V head `first[1..]`), by the AVX-512 kernel.
    ///
    /// # Safety
    /// AVX-512 with F16C; `a.v` dense F16 rows of [`values_avx512::DV`]
    /// values, holding the keys of `live`; `acc` the rows' sums, `weights`
    /// their [`KV_BLOCK`] weights each.
    #[cfg(target_arch = "x86_64")]
    unsafe fn add_values_wide(&self, a: &Attention, first: [usize; 3], live: u64, weights: &[f32], acc: &mut [f32]) {
        fn each<const R: usize>(
            rows: [usize; R],
            a: &Attention,
            first: [usize; 3],
            live: u64,
            w: &[f32],
            acc: &mut [f32],
        ) {
            let dv = values_avx512::DV;
            let sums = acc.as_mut_ptr();
            // SAFETY: the caller's contract: rows r < rows of the tile, whose
            // sums and weights the slices hold; the keys' value rows in range.
            unsafe {
                values_avx512::add_values(
                    rows.map(|r| sums.add(r * dv)),
                    rows.map(|r| w.as_ptr().add(r * KV_BLOCK)),
                    a.v.row(first[0], first[1], first[2]).cast_const(),
                    a.v.nb[1],
                    live,
                )
            }
        }
        let r = &self.rows;
        match self.len {
            1 => each([r[0]], a, first, live, weights, acc),
            2 => each([r[0], r[1]], a, first, live, weights, acc),
            3 => each([r[0], r[1], r[2]], a, first, live, weights, acc),
            _ => each([r[0], r[1], r[2], r[3]], a, first, live, weights, acc),
        }
    }

    /// Raw scores `q[r] · key` of every key of `keys` (bits from key
    /// `first[0]` of K/V head `first[1..]`) into each row's `scores`, by the
    /// kernel of path `isa` (AVX2 or AVX-512: [`scores`]).
    ///
    /// # Safety
    /// The CPU has `isa`, an AVX2 or AVX-512 path; `a.k` dense F16 rows of
    /// [`scores::DK`] values, holding the keys of `keys`; `q` the rows'
    /// queries, `scores` their [`KV_BLOCK`] scores each.
    #[cfg(target_arch = "x86_64")]
    unsafe fn score_block(&self, isa: Isa, a: &Attention, first: [usize; 3], keys: u64, q: &[f32], scores: &mut [f32]) {
        fn each<const R: usize>(
            rows: [usize; R],
            isa: Isa,
            a: &Attention,
            first: [usize; 3],
            keys: u64,
            q: &[f32],
            s: &mut [f32],
        ) {
            let (dk, out) = (scores::DK, s.as_mut_ptr());
            let rows_q = rows.map(|r| q[r * dk..].as_ptr());
            let outs = rows.map(|r| out.wrapping_add(r * KV_BLOCK));
            // SAFETY: the caller's contract: the CPU has `isa`; rows r < rows
            // of the tile, whose queries and scores the slices hold; the
            // keys' rows in range.
            unsafe {
                let at = a.k.row(first[0], first[1], first[2]).cast_const();
                match isa {
                    Isa::Avx2 => scores::score_keys_avx2(rows_q, at, a.k.nb[1], keys, outs),
                    _ => scores::score_keys(rows_q, at, a.k.nb[1], keys, outs),
                }
            }
        }
        let r = &self.rows;
        match self.len {
            1 => each([r[0]], isa, a, first, keys, q, scores),
            2 => each([r[0], r[1]], isa, a, first, keys, q, scores),
            3 => each([r[0], r[1], r[2]], isa, a, first, keys, q, scores),
            _ => each([r[0], r[1], r[2], r[3]], isa, a, first, keys, q, scores),
        }
    }

    /// Raw scores `q[r] · key` of key `j` into each row's `scores`.
    fn score(&self, key: &[f16], q: &[f32], dk: usize, scores: &mut [f32], j: usize) {
        fn each<const R: usize>(rows: [usize; R], key: &[f16], q: &[f32], dk: usize, scores: &mut [f32], j: usize) {
            let dots = simd::dot_f16_each(key, rows.map(|r| &q[r * dk..(r + 1) * dk]));
            for (r, d) in rows.into_iter().zip(dots) {
                scores[r * KV_BLOCK + j] = d;
            }
        }
        let r = &self.rows;
        match self.len {
            1 => each([r[0]], key, q, dk, scores, j),
            2 => each([r[0], r[1]], key, q, dk, scores, j),
            3 => each([r[0], r[1], r[2]], key, q, dk, scores, j),
            _ => each([r[0], r[1], r[2], r[3]], key, q, dk, scores, j),
        }
    }

    /// `acc[r] += w[r][j] · value` for each row with a non-zero weight of
    /// key `j` (`weights`: [`KV_BLOCK`] a row), as [`simd::axpy_f16`] would.
    fn add_value(&self, value: &[f16], weights: &[f32], j: usize, acc: &mut [f32], dv: usize) {
        fn each<const R: usize>(
            rows: [usize; R],
            value: &[f16],
            weights: &[f32],
            j: usize,
            acc: &mut [f32],
            dv: usize,
        ) {
            let alphas = rows.map(|r| weights[r * KV_BLOCK + j]);
            // The rows are distinct, so their outputs are disjoint.
            if let Ok(ys) = acc.get_disjoint_mut(rows.map(|r| r * dv..(r + 1) * dv)) {
                simd::axpy_f16_each(ys, alphas, value);
            }
        }
        let mut live = [0; IN_PLACE_MAX_ROWS];
        let mut n = 0;
        for &r in &self.rows[..self.len] {
            // A key the row does not see (weight 0) adds nothing, as alone.
            if weights[r * KV_BLOCK + j] != 0.0 {
                live[n] = r;
                n += 1;
            }
        }
        match n {
            0 => {}
            1 => each([live[0]], value, weights, j, acc, dv),
            2 => each([live[0], live[1]], value, weights, j, acc, dv),
            3 => each([live[0], live[1], live[2]], value, weights, j, acc, dv),
            _ => each([live[0], live[1], live[2], live[3]], value, weights, j, acc, dv),
        }
    }
}

// A block's keys are the bits of a `u64` (see `keys_except`).
const _: () = assert!(KV_BLOCK <= 64);

multiversion! {
    /// The keys `j` of a block whose value `values[j]` is not `skip`, as bits:
    /// of a row's mask values, −inf (the keys it sees); of its weights, 0 (the
    /// keys whose values it adds).
    fn keys_except(values: &[f32], skip: f32) -> u64 {
        values.iter().enumerate().fold(0, |bits, (j, &v)| bits | u64::from(v != skip) << j)
    }
}

multiversion! {
    /// A row's block of raw scores finished in place, as
    /// [`Attention::finish_score`] without a soft-cap: `x · scale + slope ·
    /// m[j]`, or −inf where that mask term is −inf (a key the row does not
    /// see, whatever its raw score). The same two roundings per key as the
    /// key-by-key loop, so the same bits.
    fn finish_masked(scores: &mut [f32], mask: &[f32], slope: f32, scale: f32) {
        for (x, &m) in scores.iter_mut().zip(mask) {
            let mv = slope * m;
            *x = if mv == f32::NEG_INFINITY { f32::NEG_INFINITY } else { *x * scale + mv };
        }
    }
}

/// Calls `f(j)` for every set bit `j` of `bits`, lowest first.
fn for_each_bit(mut bits: u64, mut f: impl FnMut(usize)) {
    while bits != 0 {
        f(bits.trailing_zeros() as usize);
        bits &= bits - 1;
    }
}

/// Columns of the values' accumulators kept in registers at once.
const V_CHUNK: usize = 32;

/// `scores[r][j] = q[r] · kb[j]` for every row `r` of `q` and key `j` of
/// the block (`kb`: its keys as f32 rows of `dk` values), each through
/// [`simd::dot_f32`] — the rows path's own dot product, so both paths score
/// alike to the bit (a transposed block scored by broadcast multiply-adds
/// was faster, but summed in another order). With a mask (`period` rows of
/// [`KV_BLOCK`] values, row `r`'s at `r % period`), a row that sees none of
/// the block (`!sees[r]`) is left alone and a key it does not see scores
/// −inf without a dot product, as on the rows path: decoding many
/// sequences, each query sees a few of a block's keys.
fn block_scores(
    q: &[f32],
    kb: &[f32],
    scores: &mut [f32],
    mask: Option<(&[f32], usize)>,
    sees: &[bool],
    dk: usize,
    block: usize,
) {
    for (r, (qr, out)) in q.chunks_exact(dk).zip(scores.chunks_exact_mut(KV_BLOCK)).enumerate() {
        if !sees[r] {
            continue;
        }
        let row_mask = mask.map(|(m, period)| &m[r % period * KV_BLOCK..r % period * KV_BLOCK + block]);
        for (j, (s, key)) in out[..block].iter_mut().zip(kb.chunks_exact(dk)).enumerate() {
            *s = match row_mask {
                Some(m) if m[j] == f32::NEG_INFINITY => f32::NEG_INFINITY,
                _ => simd::dot_f32(key, qr),
            };
        }
    }
}

multiversion! {
    /// `acc += Σ_j p[j] · vb[j]`, `vb` holding the block's value rows of
    /// `acc.len()` values each.
    fn accumulate_values(acc: &mut [f32], p: &[f32], vb: &[f32]) {
        let dv = acc.len();
        let mut c = 0;
        while let Some(o) = acc[c..].first_chunk_mut::<V_CHUNK>() {
            let mut sums = *o;
            for (j, &w) in p.iter().enumerate() {
                // A key the row does not see (weight 0) adds nothing; the
                // rows path skips it too.
                if w == 0.0 {
                    continue;
                }
                if let Some(row) = vb[j * dv + c..].first_chunk::<V_CHUNK>() {
                    for i in 0..V_CHUNK {
                        sums[i] = madd::<FMA>(w, row[i], sums[i]);
                    }
                }
            }
            *o = sums;
            c += V_CHUNK;
        }
        for i in c..dv {
            let mut s = acc[i];
            for (j, &w) in p.iter().enumerate() {
                if w != 0.0 {
                    s = madd::<FMA>(w, vb[j * dv + i], s);
                }
            }
            acc[i] = s;
        }
    }
}

/// The scratch one task works in, carved from its floats.
struct Tile<'a> {
    /// The rows' queries, `dk` each.
    q: &'a mut [f32],
    /// The rows' unnormalised outputs, `dv` each.
    acc: &'a mut [f32],
    /// The rows' scores of one block, then their weights, [`KV_BLOCK`] each.
    scores: &'a mut [f32],
    /// The rows' mask values of one block, [`KV_BLOCK`] each.
    mask: &'a mut [f32],
    /// The block's keys: [`KV_BLOCK`] rows of `dk`.
    kb: &'a mut [f32],
    /// The block's values: [`KV_BLOCK`] rows of `dv`.
    vb: &'a mut [f32],
}

impl<'a> Tile<'a> {
    fn floats(rows: usize, dk: usize, dv: usize) -> usize {
        rows * (dk + dv + 2 * KV_BLOCK) + KV_BLOCK * (dk + dv)
    }

    fn carve(tmp: &'a mut [f32], rows: usize, dk: usize, dv: usize) -> Self {
        let (q, rest) = tmp.split_at_mut(rows * dk);
        let (acc, rest) = rest.split_at_mut(rows * dv);
        let (scores, rest) = rest.split_at_mut(rows * KV_BLOCK);
        let (mask, rest) = rest.split_at_mut(rows * KV_BLOCK);
        let (kb, rest) = rest.split_at_mut(dk * KV_BLOCK);
        let vb = &mut rest[..KV_BLOCK * dv];
        Tile { q, acc, scores, mask, kb, vb }
    }
}

/// Computes `a` in tiles; `map` is its mask's [`BlockMap`] (if it has
/// one) and `work(rows)` the work of so many (query, head) rows, for the
/// split over threads.
pub(super) fn compute(a: &Attention, map: Option<&BlockMap>, work: impl Fn(usize) -> usize, par: &Par<'_>) {
    compute_on(a, map, work, par, Isa::best());
}

/// [`compute`] with the kernels of path `isa` (one this CPU has): AVX-512
/// scores a block read in place, and adds its values with the rows' sums in
/// registers.
pub(super) fn compute_on(
    a: &Attention,
    map: Option<&BlockMap>,
    work: impl Fn(usize) -> usize,
    par: &Par<'_>,
    isa: Isa,
) {
    let Attention { dk, dv, n_q, n_head, n_batch, rk, .. } = *a;
    #[cfg(target_arch = "x86_64")]
    let wide = Wide {
        values: matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) && dv == values_avx512::DV,
        scores: (isa != Isa::Scalar && dk == scores::DK).then_some(isa),
    };
    #[cfg(not(target_arch = "x86_64"))]
    let wide = {
        let _ = isa;
        Wide { values: false, scores: None }
    };
    // A tile: `group` heads (those sharing a K/V head) times `queries` queries.
    let group = rk[0];
    // As many query tiles as the target size asks for, sized evenly (16
    // queries in 8 + 8, not 10 + 6: the threads finish together).
    let q_tiles = n_q.div_ceil((QUERY_TILE_ROWS / group).clamp(1, n_q));
    let queries = n_q.div_ceil(q_tiles);
    let kv_heads = n_head / group;
    let max_rows = group * queries;
    let n_tiles = n_batch * kv_heads * q_tiles;
    let tmp_len = Tile::floats(max_rows, dk, dv);
    par.for_each(n_tiles, work(max_rows), tmp_len, |tiles, tmp| {
        let mut t = Tile::carve(tmp, max_rows, dk, dv);
        for i in tiles {
            // Tiles in order: query tile fastest, then K/V head, then batch.
            let (qt, hk, iq3) = (i % q_tiles, (i / q_tiles) % kv_heads, i / (q_tiles * kv_heads));
            let q0 = qt * queries;
            let nq = queries.min(n_q - q0);
            // SAFETY: every index is within its tensor's shape (checked by
            // the caller); this task alone writes the tile's result rows.
            unsafe { tile(a, &mut t, map, wide, [q0, nq], [hk * group, group], iq3) };
        }
    });
}

/// Which passes of a block read in place (shared by a query's heads) the
/// SIMD kernels do.
#[derive(Debug, Clone, Copy)]
struct Wide {
    /// The values' ([`values_avx512`]), on AVX-512.
    values: bool,
    /// The scores' ([`scores`]), on the path named (AVX2 or AVX-512).
    scores: Option<Isa>,
}

/// Rows of the tile: query `q0 + r % nq`, head `h0 + r / nq`. With `map`
/// (the mask's [`BlockMap`]), a block's mask values are loaded only for
/// the queries that see it. With `wide`, a block read in place has its
/// values added (AVX-512), or its keys scored (AVX2 or AVX-512), by the
/// SIMD kernels.
///
/// # Safety
/// Queries `q0..q0 + nq`, heads `h0..h0 + group` (sharing one K/V head) and
/// batch `iq3` are within the shapes; no other task writes their results;
/// `wide.values` only where the CPU has AVX-512 and `dv` is
/// [`values_avx512::DV`], `wide.scores` a path the CPU has and only where
/// `dk` is [`scores::DK`].
unsafe fn tile(
    a: &Attention,
    t: &mut Tile<'_>,
    map: Option<&BlockMap>,
    wide: Wide,
    [q0, nq]: [usize; 2],
    [h0, group]: [usize; 2],
    iq3: usize,
) {
    let (dk, dv) = (a.dk, a.dv);
    let rows = nq * group;
    let kv = [h0 / a.rk[0], iq3 / a.rk[1]];
    let row_of = |r: usize| (q0 + r % nq, h0 + r / nq);
    let Tile { q, acc, scores, mask, kb, vb } = t;
    let mut running_max = [f32::NEG_INFINITY; MAX_ROWS];
    let mut sum = [0f64; MAX_ROWS];
    for r in 0..rows {
        let (iq1, iq2) = row_of(r);
        // SAFETY: in range (the caller's contract).
        unsafe { a.q.load_row(iq1, iq2, iq3, &mut q[r * dk..(r + 1) * dk]) };
    }
    acc[..rows * dv].fill(0.0);
    let kv_f16 = [&a.k, &a.v].iter().all(|t| t.dtype == DType::F16 && t.rows_are_dense());
    // A mask with one head (the usual) is the same for a query's heads:
    // loaded and checked once per query (rows `r` and `r + nq` share it).
    let mask_period = if a.mask.as_ref().is_some_and(|m| m.ne[2] == 1) { nq } else { rows };
    for c0 in (0..a.n_kv).step_by(KV_BLOCK) {
        let block = KV_BLOCK.min(a.n_kv - c0);
        // The rows' masks (one per query when its heads share it), and
        // which rows see any key of the block.
        let mut sees = [true; MAX_ROWS];
        if let Some(m) = &a.mask {
            // With a map, `mask_period` is `nq` (one mask head): row r is query q0 + r.
            if let Some(map) = map {
                let seeing = map.queries_seeing(c0 / KV_BLOCK, q0, nq);
                if seeing == 0 {
                    continue;
                }
                for (r, s) in sees[..mask_period].iter_mut().enumerate() {
                    *s = seeing >> r & 1 == 1;
                }
            }
            for r in 0..mask_period {
                if !sees[r] {
                    continue;
                }
                let (iq1, iq2) = row_of(r);
                let mr = &mut mask[r * KV_BLOCK..r * KV_BLOCK + block];
                // SAFETY: in range (the caller's contract; the mask's rows cover the queries).
                unsafe { load_mask(m, c0, [iq1, iq2 % m.ne[2], iq3 % m.ne[3]], mr) };
                sees[r] = simd::max(mr) != f32::NEG_INFINITY;
            }
            // Row r shares row r % mask_period's mask (set already, by induction).
            for r in mask_period..rows {
                sees[r] = sees[r - mask_period];
            }
        }
        let seeing = sees[..rows].iter().filter(|&&s| s).count();
        if seeing == 0 {
            continue;
        }
        let in_place = seeing <= IN_PLACE_MAX_ROWS;
        // An F16 cache read in place: the seeing rows share each K and V row.
        let shared = (in_place && kv_f16).then(|| SharedRows::seeing(&sees[..rows]));
        if let Some(shared) = &shared {
            // SAFETY: keys c0 .. c0 + block of K/V head `kv` are in range.
            unsafe { prefetch_block(a, c0, block, [kv, kv]) };
            // Only the keys some seeing row sees: the others' scores become −inf below.
            let visible = match &a.mask {
                Some(_) => shared
                    .rows()
                    .iter()
                    .fold(0, |v, &r| v | keys_except(&mask[r % mask_period * KV_BLOCK..][..block], f32::NEG_INFINITY)),
                None => first_bits(block),
            };
            #[cfg(target_arch = "x86_64")]
            if let Some(isa) = wide.scores {
                // SAFETY: the CPU has `isa` and dk is the kernels' DK (the
                // caller's contract); the cache's rows are dense F16, keys in range.
                unsafe { shared.score_block(isa, a, [c0, kv[0], kv[1]], visible, q, scores) };
            }
            if !cfg!(target_arch = "x86_64") || wide.scores.is_none() {
                for_each_bit(visible, |j| {
                    // SAFETY: key c0 + j of K/V head `kv` is in range; its dense row holds dk halves.
                    let key = unsafe { std::slice::from_raw_parts(a.k.row(c0 + j, kv[0], kv[1]) as *const f16, dk) };
                    shared.score(key, q, dk, scores, j);
                });
            }
        }
        // Per row, the keys whose weight is not 0 (the shared pass adds only those).
        let mut weighted = [0u64; MAX_ROWS];
        if !in_place {
            // The block's keys and values, as f32.
            for j in 0..block {
                // SAFETY: key c0 + j of K/V head `kv` is in range.
                unsafe {
                    load_kv_row(&a.k, [c0 + j, kv[0], kv[1]], &mut kb[j * dk..(j + 1) * dk]);
                    load_kv_row(&a.v, [c0 + j, kv[0], kv[1]], &mut vb[j * dv..(j + 1) * dv]);
                }
            }
            let row_masks = a.mask.as_ref().map(|_| (&mask[..mask_period * KV_BLOCK], mask_period));
            block_scores(
                &q[..rows * dk],
                &kb[..block * dk],
                &mut scores[..rows * KV_BLOCK],
                row_masks,
                &sees,
                dk,
                block,
            );
        }
        for r in (0..rows).filter(|&r| sees[r]) {
            let (_, iq2) = row_of(r);
            let slope = alibi_slope(a.params.max_bias, iq2, a.n_head);
            let s = &mut scores[r * KV_BLOCK..r * KV_BLOCK + block];
            let row_mask = a.mask.as_ref().map(|_| &mask[r % mask_period * KV_BLOCK..][..block]);
            // Three loops rather than one with every case in it: the per-key
            // branches were a fifth of decoding's attention time.
            match row_mask {
                _ if in_place && shared.is_none() => {
                    for (j, x) in s.iter_mut().enumerate() {
                        let mv = row_mask.map_or(0.0, |m| slope * m[j]);
                        *x = if mv == f32::NEG_INFINITY {
                            f32::NEG_INFINITY
                        } else {
                            // SAFETY: key c0 + j of K/V head `kv` is in range; `kb` holds a row of scratch.
                            let dot = unsafe { k_dot(&a.k, [c0 + j, kv[0], kv[1]], &q[r * dk..(r + 1) * dk], kb) };
                            a.finish_score(dot) + mv
                        };
                    }
                }
                Some(m) if a.params.softcap == 0.0 => finish_masked(s, m, slope, a.scale),
                Some(m) => {
                    for (x, &mj) in s.iter_mut().zip(m) {
                        let mv = slope * mj;
                        *x = if mv == f32::NEG_INFINITY { f32::NEG_INFINITY } else { a.finish_score(*x) + mv };
                    }
                }
                None => s.iter_mut().for_each(|x| *x = a.finish_score(*x) + 0.0),
            }
            let bad = super::not_a_weight(s);
            if bad {
                // The row's result is NaN, as the softmax's would be.
                sum[r] = f64::NAN;
            }
            let block_max = simd::max(s);
            if bad || block_max == f32::NEG_INFINITY {
                // Weights of 0: the shared pass below adds nothing for the row.
                s.fill(0.0);
                continue;
            }
            let out = &mut acc[r * dv..(r + 1) * dv];
            // A new maximum rescales what was accumulated (online softmax).
            if block_max > running_max[r] {
                let rescale = (running_max[r] - block_max).exp();
                simd::scale(out, rescale);
                sum[r] *= rescale as f64;
                running_max[r] = block_max;
            }
            // The weights replace the scores (`exp_shifted` reads another slice).
            let mut row_scores = [0f32; KV_BLOCK];
            row_scores[..block].copy_from_slice(s);
            sum[r] += simd::exp_shifted(s, &row_scores[..block], running_max[r]);
            if shared.is_some() {
                // Added below, key by key for every row.
                weighted[r] = keys_except(s, 0.0);
            } else if in_place {
                for (j, &w) in s.iter().enumerate() {
                    if w != 0.0 {
                        // SAFETY: value c0 + j of K/V head `kv` is in range; `kb` holds a row of scratch.
                        unsafe { v_axpy(&a.v, [c0 + j, kv[0], kv[1]], w, out, kb) };
                    }
                }
            } else {
                accumulate_values(out, s, &vb[..block * dv]);
            }
        }
        if let Some(shared) = &shared {
            let live = shared.rows().iter().fold(0, |v, &r| v | weighted[r]);
            #[cfg(target_arch = "x86_64")]
            if wide.values {
                // SAFETY: the CPU has AVX-512 and dv is its DV (the caller's
                // contract); the rows are distinct, the cache's rows dense F16.
                unsafe { shared.add_values_wide(a, [c0, kv[0], kv[1]], live, scores, acc) };
                continue;
            }
            for_each_bit(live, |j| {
                // SAFETY: value c0 + j of K/V head `kv` is in range; its dense row holds dv halves.
                let value = unsafe { std::slice::from_raw_parts(a.v.row(c0 + j, kv[0], kv[1]) as *const f16, dv) };
                shared.add_value(value, scores, j, acc, dv);
            });
        }
    }
    for r in 0..rows {
        let (iq1, iq2) = row_of(r);
        let out = &mut acc[r * dv..(r + 1) * dv];
        add_sink(a, iq2, &mut running_max[r], &mut sum[r], out);
        // A row that sees no key gets zeros, as in ggml.
        let inv = if sum[r] == 0.0 { 0.0 } else { (1.0 / sum[r]) as f32 };
        simd::scale(out, inv);
        // SAFETY: result row (iq2, iq1, iq3) is in range and this task's.
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), a.dst.row(iq2, iq1, iq3) as *mut f32, dv) };
    }
}
