//! The repacked layouts of Q2_K and Q3_K: groups of 16 rows, each 256-value
//! super-block of the 16 rows one record ([`super::k_records`]), the 2-bit
//! quant plane (and Q3_K's high-bit plane) chunked as Q6_K's planes are
//! ([`super::q6k_layout`]), the scales (and Q2_K's mins) taken out of their
//! packing at load, so that a product does no bit surgery on them.
//!
//! Q2_K (`x = d·sc_g·q − dmin·m_g`, `q` 0..4, `sc_g` and `m_g` 4-bit):
//!
//! | offset | bytes | what |
//! |---:|---:|---|
//! | [`Q2_D`] | 32 | the 16 rows' f16 `d` |
//! | [`Q2_DMIN`] | 32 | the 16 rows' f16 `dmin` |
//! | [`Q2_SC`] | 256 | per sub-block `g` (16 values), 16 bytes: row `r`'s scale at `16g + r` |
//! | [`Q2_MINS`] | 256 | per sub-block pair `p`, 32 bytes: row `r`'s mins of sub-blocks `2p`, `2p + 1` at `32p + 2r`, `+ 1` |
//! | [`Q2_QS`] | 1024 | per 32 bytes `h` of the rows' `qs`, eight 64-byte chunks: chunk `c` holds `qs[32h + 4c ..][..4]` of each row, row `r` at `4r` |
//!
//! A record is [`Q2_RECORD`] = 25 × 64 bytes, 100 a row against the file's 84.
//!
//! Q3_K (`x = d·sc_g·(q − 4)`, `q` 0..8 its two low bits in `qs` as Q2_K's,
//! its high bit in `hmask`, `sc_g` signed 6-bit):
//!
//! | offset | bytes | what |
//! |---:|---:|---|
//! | [`Q3_D`] | 32 | the 16 rows' f16 `d` |
//! | [`Q3_SC`] | 256 | per sub-block `g`, 16 bytes: row `r`'s signed scale (`sc − 32`) at `16g + r` |
//! | [`Q3_QS`] | 1024 | the `qs` chunks, as Q2_K's |
//! | [`Q3_HM`] | 512 | the rows' 32 `hmask` bytes, eight chunks the same way |
//!
//! (bytes 32..64 are padding, so that the chunks stay 64-byte aligned; a
//! record is [`Q3_RECORD`] = 29 × 64 bytes, 116 a row against the file's 110.)
//!
//! Value `128h + 32f + l` (`f` < 4, `l` < 32) of a row is bits `2f, 2f + 1`
//! of `qs[32h + l]` (and, for Q3_K, bit `4h + f` of `hmask[l]` above them).
//! Chunk `c` of `qs` part `h` (and chunk `c` of `hmask`) hold it for
//! `l = 4c .. 4c + 4`: one load, a shift and a mask give 16 rows' next 4
//! quants in the 16 i32 lanes of a register; chunks 0–3 are sub-block
//! `8h + 2f`, chunks 4–7 sub-block `8h + 2f + 1`.
//!
//! The activation is Q8_K; a prepared column keeps per super-block
//! [`Q2_AUX`] bytes for Q2_K, the 16 sub-blocks' quant sums as i16 (the
//! pairs `vpmaddwd` multiplies by a pair of mins), and [`Q3_AUX`] bytes for
//! Q3_K, `−4·bsums[g]` as i32, where a sub-block's integer sum starts (the
//! quants are stored as `q`, unsigned, the operand `vpdpbusd` wants).

use gantry_engine::quant::{BlockQ2K, BlockQ3K, BlockQ8K, F16Bits};

use super::Job;
use super::k_records::KRecord;
use super::q6k_layout::plane_byte;
use crate::quant::Isa;

/// Offset of a Q2_K record's f16 `d`.
pub(crate) const Q2_D: usize = 0;
/// Offset of a Q2_K record's f16 `dmin`.
pub(crate) const Q2_DMIN: usize = 32;
/// Offset of a Q2_K record's scale bytes (16 per sub-block).
pub(crate) const Q2_SC: usize = 64;
/// Offset of a Q2_K record's min pairs (32 bytes per sub-block pair).
pub(crate) const Q2_MINS: usize = 320;
/// Offset of a Q2_K record's `qs` chunks (512 bytes per 32 bytes of a row's `qs`).
pub(crate) const Q2_QS: usize = 576;
/// Bytes of one Q2_K record (16 rows × one super-block).
pub(crate) const Q2_RECORD: usize = 1600;
/// Q2_K column bytes per super-block beside its quants and scale.
pub(crate) const Q2_AUX: usize = 32;

/// Offset of a Q3_K record's f16 `d`.
pub(crate) const Q3_D: usize = 0;
/// Offset of a Q3_K record's signed scales (16 per sub-block).
pub(crate) const Q3_SC: usize = 64;
/// Offset of a Q3_K record's `qs` chunks.
pub(crate) const Q3_QS: usize = 320;
/// Offset of a Q3_K record's `hmask` chunks.
pub(crate) const Q3_HM: usize = 1344;
/// Bytes of one Q3_K record (16 rows × one super-block).
pub(crate) const Q3_RECORD: usize = 1856;
/// Q3_K column bytes per super-block beside its quants and scale.
pub(crate) const Q3_AUX: usize = 64;

/// Q2_K: `x = d·sc_g·q − dmin·m_g`, sub-blocks `g` of 16 values.
pub(crate) struct RQ2K;
/// Q3_K: `x = d·sc_g·(q − 4)`, sub-blocks `g` of 16 values.
pub(crate) struct RQ3K;

/// Q3_K's 16 six-bit scale codes (`sc + 32`, 0..64) packed back into the
/// file's 12 bytes: the inverse of `BlockQ3K::unpacked_scales` (96 bits
/// either way, so any block's bytes come back).
fn packed_q3_scales(codes: &[u8; 16]) -> [u8; 12] {
    let mut q = [0u8; 12];
    for (j, &s) in codes.iter().enumerate() {
        q[j % 8] |= (s & 0x0F) << (4 * (j / 8));
        q[8 + j % 4] |= (s >> 4) << (2 * (j / 4));
    }
    q
}

/// Runs a Q2_K (`Q3` false) or Q3_K job on the path `isa`.
///
/// # Safety
/// As [`Job`] says, and `isa` is a path this CPU has.
unsafe fn run_job<const Q3: bool>(isa: Isa, job: &Job) {
    match isa {
        // SAFETY: the caller's contract.
        Isa::Scalar => unsafe { super::q23k_scalar::run::<Q3>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; `Isa::Avx2` is only handed out
        // after checking AVX2, FMA and F16C.
        Isa::Avx2 => unsafe { super::q23k_avx2::run::<Q3>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; `Isa::Avx512` is only handed out
        // after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
        Isa::Avx512 => unsafe { super::q23k_avx512::run_plain::<Q3>(job) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller's contract; as `Isa::Avx512`, with AVX512_VNNI checked too.
        Isa::Avx512Vnni => unsafe { super::q23k_avx512::run_vnni::<Q3>(job) },
    }
}

impl KRecord for RQ2K {
    type Block = BlockQ2K;
    const RECORD: usize = Q2_RECORD;
    const AUX: usize = Q2_AUX;

    fn pack_block(b: &BlockQ2K, r: usize, rec: &mut [u8]) {
        rec[Q2_D + 2 * r..Q2_D + 2 * r + 2].copy_from_slice(&b.d.0);
        rec[Q2_DMIN + 2 * r..Q2_DMIN + 2 * r + 2].copy_from_slice(&b.dmin.0);
        for (g, &s) in b.scales.iter().enumerate() {
            rec[Q2_SC + 16 * g + r] = s & 0x0F;
            rec[Q2_MINS + 32 * (g / 2) + 2 * r + g % 2] = s >> 4;
        }
        for (j, &v) in b.qs.iter().enumerate() {
            rec[plane_byte(Q2_QS, r, j)] = v;
        }
    }

    fn block_of(rec: &[u8], r: usize) -> BlockQ2K {
        let scales =
            std::array::from_fn(|g| rec[Q2_SC + 16 * g + r] | (rec[Q2_MINS + 32 * (g / 2) + 2 * r + g % 2] << 4));
        BlockQ2K {
            scales,
            qs: std::array::from_fn(|j| rec[plane_byte(Q2_QS, r, j)]),
            d: F16Bits([rec[Q2_D + 2 * r], rec[Q2_D + 2 * r + 1]]),
            dmin: F16Bits([rec[Q2_DMIN + 2 * r], rec[Q2_DMIN + 2 * r + 1]]),
        }
    }

    fn aux(a: &BlockQ8K, aux: &mut [u8]) {
        for (g, &s) in a.bsums.iter().enumerate() {
            aux[2 * g..2 * g + 2].copy_from_slice(&s.to_le_bytes());
        }
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        // SAFETY: the caller's contract.
        unsafe { run_job::<false>(isa, job) }
    }
}

impl KRecord for RQ3K {
    type Block = BlockQ3K;
    const RECORD: usize = Q3_RECORD;
    const AUX: usize = Q3_AUX;

    fn pack_block(b: &BlockQ3K, r: usize, rec: &mut [u8]) {
        rec[Q3_D + 2 * r..Q3_D + 2 * r + 2].copy_from_slice(&b.d.0);
        for (g, &s) in b.unpacked_scales().iter().enumerate() {
            rec[Q3_SC + 16 * g + r] = s as u8;
        }
        for (j, &v) in b.qs.iter().enumerate() {
            rec[plane_byte(Q3_QS, r, j)] = v;
        }
        for (l, &v) in b.hmask.iter().enumerate() {
            rec[plane_byte(Q3_HM, r, l)] = v;
        }
    }

    fn block_of(rec: &[u8], r: usize) -> BlockQ3K {
        // The stored scale is `sc − 32` ∈ [−32, 32): its code is back in 0..64.
        let codes: [u8; 16] = std::array::from_fn(|g| (rec[Q3_SC + 16 * g + r] as i8 as i16 + 32) as u8);
        BlockQ3K {
            hmask: std::array::from_fn(|l| rec[plane_byte(Q3_HM, r, l)]),
            qs: std::array::from_fn(|j| rec[plane_byte(Q3_QS, r, j)]),
            scales: packed_q3_scales(&codes),
            d: F16Bits([rec[Q3_D + 2 * r], rec[Q3_D + 2 * r + 1]]),
        }
    }

    fn aux(a: &BlockQ8K, aux: &mut [u8]) {
        for (g, &s) in a.bsums.iter().enumerate() {
            aux[4 * g..4 * g + 4].copy_from_slice(&(-4 * i32::from(s)).to_le_bytes());
        }
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        // SAFETY: the caller's contract.
        unsafe { run_job::<true>(isa, job) }
    }
}
