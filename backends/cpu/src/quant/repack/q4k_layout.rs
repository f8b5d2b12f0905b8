//! The repacked layouts of Q4_K and Q5_K: groups of 16 rows, as the
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
//! Q5_K's record is Q4_K's followed by its fifth bits ([`QH`]): 512
//! bytes, chunked as the quants are, so that one load, a shift and a mask
//! give a chunk's fifth bits for either sub-block of a pair ([`RECORD5`]
//! bytes, 180 a row against the file's 176).
//!
//! The activation is Q8_K, as in ggml; a prepared column is the quants of
//! every super-block (256 bytes each), then each super-block's f32 scale,
//! then per super-block [`AUX`] bytes: the 8 sub-blocks' quant sums as
//! i16 (`bsums[2j] + bsums[2j + 1]`, at most 32·128), the pairs the mins
//! multiply.

use gantry_engine::quant::{BlockQ4K, BlockQ5K, BlockQ8K, F16Bits, get_scale_min_k4};

use super::Job;
use super::k_records::KRecord;
use crate::quant::Isa;

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

/// Offset of Q5_K's fifth-bit plane (after Q4_K's record): eight 64-byte
/// chunks, chunk `c` holding `qh[4c .. 4c + 4]` of each row, row `r` at
/// `4r`; bit `j` of `qh[l]` is the fifth bit of value `32j + l`.
pub(crate) const QH: usize = RECORD;
/// Bytes of one Q5_K record (45 × 64).
pub(crate) const RECORD5: usize = RECORD + 512;

/// Q4_K: `x = d·sc_j·q − dmin·m_j`, sub-blocks `j` of 32 values.
pub(crate) struct RQ4K;
/// Q5_K: Q4_K's form with a fifth bit to each quant.
pub(crate) struct RQ5K;

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
fn pack_block(b: &BlockQ4K, r: usize, rec: &mut [u8]) {
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
fn block_of(rec: &[u8], r: usize) -> BlockQ4K {
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

/// Offset in a record of Q5_K's `qh[l]` of row `r`.
#[inline]
pub(crate) fn qh_byte(r: usize, l: usize) -> usize {
    QH + 64 * (l / 4) + 4 * r + l % 4
}

impl KRecord for RQ5K {
    type Block = BlockQ5K;
    const RECORD: usize = RECORD5;
    const AUX: usize = AUX;

    fn pack_block(b: &BlockQ5K, r: usize, rec: &mut [u8]) {
        let four = BlockQ4K { d: b.d, dmin: b.dmin, scales: b.scales, qs: b.qs };
        pack_block(&four, r, rec);
        for (l, &v) in b.qh.iter().enumerate() {
            rec[qh_byte(r, l)] = v;
        }
    }

    fn block_of(rec: &[u8], r: usize) -> BlockQ5K {
        let four = block_of(rec, r);
        let qh = std::array::from_fn(|l| rec[qh_byte(r, l)]);
        BlockQ5K { d: four.d, dmin: four.dmin, scales: four.scales, qh, qs: four.qs }
    }

    fn aux(a: &BlockQ8K, aux: &mut [u8]) {
        RQ4K::aux(a, aux)
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        // SAFETY: the caller's contract.
        unsafe { run_job::<true>(isa, job) }
    }
}

/// Runs a Q4_K (`FIFTH` false) or Q5_K job on the path `isa`.
///
/// # Safety
/// As [`Job`] says, and `isa` is a path this CPU has.
unsafe fn run_job<const FIFTH: bool>(isa: Isa, job: &Job) {
    match isa {
        // SAFETY: the caller's contract.
        Isa::Scalar => unsafe { super::q4k_scalar::run::<FIFTH>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; `Isa::Avx2` is only handed out
        // after checking AVX2, FMA and F16C.
        Isa::Avx2 => unsafe { super::q4k_avx2::run::<FIFTH>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; `Isa::Avx512` is only handed out
        // after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
        Isa::Avx512 => unsafe { super::q4k_avx512::run_plain::<FIFTH>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; as `Isa::Avx512`, with AVX512_VNNI checked too.
        Isa::Avx512Vnni => unsafe { super::q4k_avx512::run_vnni::<FIFTH>(job) },
    }
}

impl KRecord for RQ4K {
    type Block = BlockQ4K;
    const RECORD: usize = RECORD;
    const AUX: usize = AUX;

    fn pack_block(b: &BlockQ4K, r: usize, rec: &mut [u8]) {
        pack_block(b, r, rec)
    }

    fn block_of(rec: &[u8], r: usize) -> BlockQ4K {
        block_of(rec, r)
    }

    fn aux(a: &BlockQ8K, aux: &mut [u8]) {
        for j in 0..8 {
            // At most 2·16·128: no overflow.
            let s = a.bsums[2 * j].wrapping_add(a.bsums[2 * j + 1]);
            aux[2 * j..2 * j + 2].copy_from_slice(&s.to_le_bytes());
        }
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        // SAFETY: the caller's contract.
        unsafe { run_job::<false>(isa, job) }
    }
}
