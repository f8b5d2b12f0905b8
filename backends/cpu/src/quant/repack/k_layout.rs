//! The repacked layout of Q4_K: groups of [`GROUP_ROWS`] rows, as the
//! 32-value types have (see [`super::layout`]), but each 256-value
//! super-block of the 16 rows one contiguous record, its scales and mins
//! already taken out of their 6-bit packing, so that a product does no bit
//! surgery on them:
//!
//! | offset | bytes | what |
//! |---:|---:|---|
//! | [`D`] | 32 | the 16 rows' f16 `d` |
//! | [`DMIN`] | 32 | the 16 rows' f16 `dmin` |
//! | [`SC`] | 128 | per sub-block `j` (32 values), 16 bytes: row `r`'s 6-bit scale at `16j + r` |
//! | [`MINS`] | 128 | per sub-block pair `p`, 32 bytes: row `r`'s mins of sub-blocks `2p`, `2p + 1` at `32p + 2r`, `+ 1` |
//! | [`QS`] | 2048 | per sub-block pair `p`, eight 64-byte chunks: chunk `c` holds bytes `4c .. 4c + 4` of each row's 32 quant bytes of the pair, row `r` at `4r` |
//!
//! A record is [`RECORD`] bytes (37 × 64: every chunk stays 64-byte
//! aligned), 148 bytes a row against the file's 144. Q4_K's quant byte
//! `32p + l` holds value `64p + l` (low nibble) and `64p + 32 + l` (high),
//! so a chunk's low nibbles are values `32·2p + 4c ..` of sub-block `2p`
//! and its high nibbles the same places of sub-block `2p + 1`: one 64-byte
//! load, an `and` (and a shift), and 16 rows' next 4 values of a sub-block
//! are the 16 i32 lanes of a register, as for Q4_0.
//!
//! The scale bytes widen to one i32 lane a row (`vpmovzxbd`) to multiply a
//! sub-block's integer sum; the min pairs widen to i16 pairs (`vpmovzxbw`)
//! that `vpmaddwd` multiplies by the column's pair of sub-block sums.
//!
//! The activation is Q8_K, as in ggml; a prepared column is the quants of
//! every super-block (256 bytes each), then each super-block's f32 scale,
//! then per super-block [`AUX`] bytes: the 8 sub-blocks' quant sums as
//! i16 (`bsums[2j] + bsums[2j + 1]`, at most 32·128), the pairs the mins
//! multiply.

use gantry_engine::quant::{BlockQ4K, BlockQ8K, F16Bits, QuantBlock, get_scale_min_k4};
use gantry_engine::{Error, Result};

use super::Job;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout, Repacked, round_up};
use super::pack::bad;
use crate::quant::Isa;

/// Values per super-block.
pub(crate) const SUPER: usize = 256;
/// Offset of the rows' f16 `d` in a record.
pub(crate) const D: usize = 0;
/// Offset of the rows' f16 `dmin`.
pub(crate) const DMIN: usize = 32;
/// Offset of the scale bytes (16 per sub-block).
pub(crate) const SC: usize = 64;
/// Offset of the min pairs (32 bytes per sub-block pair).
pub(crate) const MINS: usize = 192;
/// Offset of the quant chunks (512 bytes per sub-block pair).
pub(crate) const QS: usize = 320;
/// Bytes of one record (16 rows × one super-block).
pub(crate) const RECORD: usize = 2368;
/// Column bytes per super-block beside its quants and scale.
pub(crate) const AUX: usize = 16;

/// Q4_K: `x = d·sc_j·q − dmin·m_j`, sub-blocks `j` of 32 values.
pub(crate) struct RQ4K;

/// Offset in a record of quant byte `j` (0..128) of row `r`.
#[inline]
pub(crate) fn quant_byte(r: usize, j: usize) -> usize {
    let (p, l) = (j / 32, j % 32);
    QS + 512 * p + 64 * (l / 4) + 4 * r + l % 4
}

/// The 6-bit scales and mins of a Q4_K block (ggml's `get_scale_min_k4`).
fn scales_mins(b: &BlockQ4K) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        (sc[j], m[j]) = get_scale_min_k4(j, &b.scales);
    }
    (sc, m)
}

/// The inverse of [`scales_mins`]: 16 six-bit values are exactly the 96
/// bits of the 12 bytes, so any block's bytes come back.
fn packed_scales(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for j in 0..4 {
        q[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        q[j + 4] = m[j] | ((m[j + 4] >> 4) << 6);
        q[j + 8] = (sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4);
    }
    q
}

/// Writes plain block `b` as row `r` of the record `rec`.
pub(crate) fn pack_block(b: &BlockQ4K, r: usize, rec: &mut [u8]) {
    rec[D + 2 * r..D + 2 * r + 2].copy_from_slice(&b.d.0);
    rec[DMIN + 2 * r..DMIN + 2 * r + 2].copy_from_slice(&b.dmin.0);
    let (sc, m) = scales_mins(b);
    for j in 0..8 {
        rec[SC + 16 * j + r] = sc[j];
        rec[MINS + 32 * (j / 2) + 2 * r + j % 2] = m[j];
    }
    for (j, &v) in b.qs.iter().enumerate() {
        rec[quant_byte(r, j)] = v;
    }
}

/// Row `r` of the record `rec`, rebuilt as the plain block.
pub(crate) fn block_of(rec: &[u8], r: usize) -> BlockQ4K {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        sc[j] = rec[SC + 16 * j + r];
        m[j] = rec[MINS + 32 * (j / 2) + 2 * r + j % 2];
    }
    let mut qs = [0u8; 128];
    for (j, v) in qs.iter_mut().enumerate() {
        *v = rec[quant_byte(r, j)];
    }
    BlockQ4K {
        d: F16Bits([rec[D + 2 * r], rec[D + 2 * r + 1]]),
        dmin: F16Bits([rec[DMIN + 2 * r], rec[DMIN + 2 * r + 1]]),
        scales: packed_scales(&sc, &m),
        qs,
    }
}

/// The layout of a group of rows of `k` values (a positive multiple of 256).
fn group_layout(k: usize) -> Option<GroupLayout> {
    if k == 0 || !k.is_multiple_of(SUPER) {
        return None;
    }
    let nb = k / SUPER;
    Some(GroupLayout { nb, scale_stride: 0, quants_at: 0, quant_stride: RECORD, bytes: nb.checked_mul(RECORD)? })
}

/// The layout of a prepared Q8_K column of `k` values.
fn column_layout(k: usize) -> ColumnLayout {
    let nb = k / SUPER;
    ColumnLayout { nb, d_at: SUPER * nb, aux_at: (SUPER + 4) * nb, bytes: round_up((SUPER + 4 + AUX) * nb) }
}

/// The layout of one group of `rows` rows, checked against a plain side of
/// `plain_len` bytes (0: not checked) and a group of `group_len` bytes.
fn check(k: usize, rows: usize, plain_len: usize, group_len: usize, what: &str) -> Result<GroupLayout> {
    let layout = group_layout(k).ok_or_else(|| bad(format!("{what}: Q4_K rows of {k} values are not whole blocks")))?;
    let row_bytes = layout.nb * size_of::<BlockQ4K>();
    if rows > GROUP_ROWS || group_len < layout.bytes || (plain_len > 0 && plain_len < rows * row_bytes) {
        return Err(bad(format!(
            "{what}: {rows} Q4_K rows of {k} values need {} plain and {} repacked bytes, got {plain_len} and {group_len}",
            rows * row_bytes,
            layout.bytes
        )));
    }
    Ok(layout)
}

impl Repacked for RQ4K {
    type Block = BlockQ4K;
    type Act = BlockQ8K;

    fn group_layout(k: usize) -> Option<GroupLayout> {
        group_layout(k)
    }

    fn column_layout(k: usize) -> ColumnLayout {
        column_layout(k)
    }

    fn prepare_column(_isa: Isa, a: &[BlockQ8K], layout: &ColumnLayout, out: &mut [u8]) {
        let (qs, rest) = out.split_at_mut(layout.d_at);
        let (d, aux) = rest.split_at_mut(layout.aux_at - layout.d_at);
        for (b, blk) in a.iter().enumerate().take(layout.nb) {
            qs[SUPER * b..SUPER * (b + 1)].copy_from_slice(bytemuck::cast_slice(&blk.qs));
            d[4 * b..4 * b + 4].copy_from_slice(&blk.d.to_le_bytes());
            for j in 0..8 {
                let s = blk.bsums[2 * j].wrapping_add(blk.bsums[2 * j + 1]);
                aux[AUX * b + 2 * j..AUX * b + 2 * j + 2].copy_from_slice(&s.to_le_bytes());
            }
        }
    }

    fn pack(k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
        let layout = check(k, rows, plain.len(), out.len(), "repack")?;
        // Padding rows (a short last group) are zero: scales 0, so they add nothing.
        out[..layout.bytes].fill(0);
        let row_bytes = layout.nb * size_of::<BlockQ4K>();
        for r in 0..rows {
            let blocks: &[BlockQ4K] = bytemuck::cast_slice(&plain[r * row_bytes..(r + 1) * row_bytes]);
            for (b, blk) in blocks.iter().enumerate() {
                pack_block(blk, r, &mut out[b * RECORD..(b + 1) * RECORD]);
            }
        }
        Ok(())
    }

    fn unpack(k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()> {
        let layout = check(k, rows, plain.len(), group.len(), "unrepack")?;
        let row_bytes = layout.nb * size_of::<BlockQ4K>();
        for r in 0..rows {
            let blocks: &mut [BlockQ4K] = bytemuck::cast_slice_mut(&mut plain[r * row_bytes..(r + 1) * row_bytes]);
            for (b, blk) in blocks.iter_mut().enumerate() {
                *blk = block_of(&group[b * RECORD..(b + 1) * RECORD], r);
            }
        }
        Ok(())
    }

    fn dequantize(k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()> {
        check(k, r + 1, 0, group.len(), "dequantize")?;
        if out.len() < k {
            return Err(Error::InvalidOp {
                op: "CPU_REPACK",
                reason: format!("a row of {k} values does not fit in {} values", out.len()),
            });
        }
        for (b, chunk) in out[..k].chunks_exact_mut(SUPER).enumerate() {
            block_of(&group[b * RECORD..(b + 1) * RECORD], r).dequantize(chunk);
        }
        Ok(())
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        match isa {
            // SAFETY: the caller's contract.
            Isa::Scalar => unsafe { super::k_scalar::run(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; `Isa::Avx2` is only handed out
            // after checking AVX2, FMA and F16C.
            Isa::Avx2 => unsafe { super::k_avx2::run(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; `Isa::Avx512` is only handed out
            // after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
            Isa::Avx512 => unsafe { super::k_avx512::run_plain(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; as `Isa::Avx512`, with AVX512_VNNI checked too.
            Isa::Avx512Vnni => unsafe { super::k_avx512::run_vnni(job) },
        }
    }
}
