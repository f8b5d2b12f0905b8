//! The repacked layout of Q6_K: groups of 16 rows, each 256-value
//! super-block of the 16 rows one record ([`super::k_records`]), the 6-bit
//! quants kept in their two planes (low nibbles, high 2-bit pairs) so that
//! the record reads hardly more memory than the file's rows, but laid out
//! so that a few loads, shifts and masks give 16 rows' next 4 values of a
//! sub-block in the 16 i32 lanes of a register:
//!
//! | offset | bytes | what |
//! |---:|---:|---|
//! | [`D`] | 32 | the 16 rows' f16 `d` |
//! | [`SC`] | 256 | per sub-block `g` (16 values), 16 bytes: row `r`'s signed scale at `16g + r` |
//! | [`QL`] | 2048 | per 32 bytes `p` of the rows' `ql`, eight 64-byte chunks: chunk `c` holds `ql[32p + 4c ..][..4]` of each row, row `r` at `4r` |
//! | [`QH`] | 1024 | per 32 bytes `h` of the rows' `qh`, eight chunks the same way |
//!
//! (bytes 288..320 are padding, so that the quant chunks stay 64-byte
//! aligned; a record is [`RECORD`] = 53 × 64 bytes, 212 a row against the
//! file's 210.)
//!
//! Value `128h + 32f + l` (`f` < 4, `l` < 32) of a row is `ql[64h + 32(f
//! % 2) + l]`'s nibble `f / 2` with bits `2f, 2f + 1` of `qh[32h + l]` above
//! it, minus 32. Chunk `c` of `ql` part `2h + f % 2` and chunk `c` of `qh`
//! part `h` hold it for `l = 4c .. 4c + 4`: chunks 0–3 are sub-block
//! `8h + 2f`, chunks 4–7 sub-block `8h + 2f + 1`.
//!
//! The activation is Q8_K; a prepared column keeps per super-block [`AUX`]
//! bytes: for each sub-block `g`, `−32·bsums[g]` as i32, where a
//! sub-block's integer sum starts (the quants are stored as `q + 32`,
//! unsigned, the operand `vpdpbusd` wants).

use gantry_engine::quant::{BlockQ6K, BlockQ8K, F16Bits};

use super::Job;
use super::k_records::KRecord;
use crate::quant::Isa;

/// Offset of the rows' f16 `d` in a record.
pub(crate) const D: usize = 0;
/// Offset of the scale bytes (16 per sub-block).
pub(crate) const SC: usize = 32;
/// Offset of the `ql` chunks (512 bytes per 32 bytes of a row's `ql`).
pub(crate) const QL: usize = 320;
/// Offset of the `qh` chunks (512 bytes per 32 bytes of a row's `qh`).
pub(crate) const QH: usize = 2368;
/// Bytes of one record (16 rows × one super-block).
pub(crate) const RECORD: usize = 3392;
/// Column bytes per super-block beside its quants and scale.
pub(crate) const AUX: usize = 64;

/// Q6_K: `x = d·sc_g·(q − 32)`, sub-blocks `g` of 16 values.
pub(crate) struct RQ6K;

/// Offset in a record of byte `j` of 32-byte part `p` of row `r`'s plane at `plane`.
#[inline]
pub(crate) fn plane_byte(plane: usize, r: usize, j: usize) -> usize {
    let (p, l) = (j / 32, j % 32);
    plane + 512 * p + 64 * (l / 4) + 4 * r + l % 4
}

impl KRecord for RQ6K {
    type Block = BlockQ6K;
    const RECORD: usize = RECORD;
    const AUX: usize = AUX;

    fn pack_block(b: &BlockQ6K, r: usize, rec: &mut [u8]) {
        rec[D + 2 * r..D + 2 * r + 2].copy_from_slice(&b.d.0);
        for (g, &s) in b.scales.iter().enumerate() {
            rec[SC + 16 * g + r] = s as u8;
        }
        for (j, &v) in b.ql.iter().enumerate() {
            rec[plane_byte(QL, r, j)] = v;
        }
        for (j, &v) in b.qh.iter().enumerate() {
            rec[plane_byte(QH, r, j)] = v;
        }
    }

    fn block_of(rec: &[u8], r: usize) -> BlockQ6K {
        let mut scales = [0i8; 16];
        for (g, s) in scales.iter_mut().enumerate() {
            *s = rec[SC + 16 * g + r] as i8;
        }
        let mut ql = [0u8; 128];
        for (j, v) in ql.iter_mut().enumerate() {
            *v = rec[plane_byte(QL, r, j)];
        }
        let mut qh = [0u8; 64];
        for (j, v) in qh.iter_mut().enumerate() {
            *v = rec[plane_byte(QH, r, j)];
        }
        BlockQ6K { ql, qh, scales, d: F16Bits([rec[D + 2 * r], rec[D + 2 * r + 1]]) }
    }

    fn aux(a: &BlockQ8K, aux: &mut [u8]) {
        for (g, &s) in a.bsums.iter().enumerate() {
            aux[4 * g..4 * g + 4].copy_from_slice(&(-32 * i32::from(s)).to_le_bytes());
        }
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        match isa {
            // SAFETY: the caller's contract.
            Isa::Scalar => unsafe { super::q6k_scalar::run(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; `Isa::Avx2` is only handed out
            // after checking AVX2, FMA and F16C.
            Isa::Avx2 => unsafe { super::q6k_avx2::run(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; `Isa::Avx512` is only handed out
            // after checking AVX-512 F/BW/VL/DQ and AVX2/FMA/F16C.
            Isa::Avx512 => unsafe { super::q6k_avx512::run_plain(job) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the caller's contract; as `Isa::Avx512`, with AVX512_VNNI checked too.
            Isa::Avx512Vnni => unsafe { super::q6k_avx512::run_vnni(job) },
        }
    }
}
