//! What the repacked K-quants share: a group of [`GROUP_ROWS`] rows is its
//! 256-value super-blocks one after the other, each a record of a size and
//! layout of the type's own ([`KRecord`]: Q4_K in [`super::q4k_layout`],
//! Q6_K in [`super::q6k_layout`], Q2_K and Q3_K in [`super::q23k_layout`]),
//! and a prepared Q8_K column is the quants of every super-block (256
//! bytes each), then each super-block's f32 scale, then per super-block
//! [`KRecord::AUX`] bytes of the type's own (sums of the column's quants
//! the type's kernels start from or multiply). Packing both ways, row by row, and [`Repacked`] for every
//! such type ([`Records`]) are here.

use std::marker::PhantomData;

use gantry_engine::quant::{BlockQ8K, QuantBlock};
use gantry_engine::{Error, Result};

use super::Job;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout, Repacked, round_up};
use super::pack::bad;
use crate::quant::Isa;

/// Values per super-block.
pub(crate) const SUPER: usize = 256;

/// A K-quant with a repacked record per super-block of 16 rows.
pub(crate) trait KRecord: 'static {
    /// The plain (ggml) block.
    type Block: QuantBlock + Send + Sync;
    /// Bytes of one record (a multiple of 64, so that every record starts aligned).
    const RECORD: usize;
    /// Column bytes per super-block beside its quants and scale.
    const AUX: usize;
    /// Writes plain block `b` as row `r` of the record `rec`.
    fn pack_block(b: &Self::Block, r: usize, rec: &mut [u8]);
    /// Row `r` of the record `rec`, rebuilt as the plain block (the same bytes).
    fn block_of(rec: &[u8], r: usize) -> Self::Block;
    /// The [`KRecord::AUX`] bytes of activation block `a`.
    fn aux(a: &BlockQ8K, aux: &mut [u8]);
    /// Runs `job` on the path `isa`.
    ///
    /// # Safety
    /// As [`Job`] says, and `isa` is a path this CPU has.
    unsafe fn run_job(isa: Isa, job: &Job);
}

/// The layout of a group of rows of `k` values (a positive multiple of 256).
fn group_layout<K: KRecord>(k: usize) -> Option<GroupLayout> {
    if k == 0 || !k.is_multiple_of(SUPER) {
        return None;
    }
    let nb = k / SUPER;
    Some(GroupLayout { nb, scale_stride: 0, quants_at: 0, quant_stride: K::RECORD, bytes: nb.checked_mul(K::RECORD)? })
}

/// The layout of a prepared Q8_K column of `k` values.
fn column_layout<K: KRecord>(k: usize) -> ColumnLayout {
    let nb = k / SUPER;
    ColumnLayout { nb, d_at: SUPER * nb, aux_at: (SUPER + 4) * nb, bytes: round_up((SUPER + 4 + K::AUX) * nb) }
}

/// The layout of one group of `rows` rows, checked against a plain side of
/// `plain_len` bytes (0: not checked) and a group of `group_len` bytes.
fn check<K: KRecord>(k: usize, rows: usize, plain_len: usize, group_len: usize, what: &str) -> Result<GroupLayout> {
    let dtype = <K::Block as QuantBlock>::DTYPE;
    let layout =
        group_layout::<K>(k).ok_or_else(|| bad(format!("{what}: {dtype} rows of {k} values are not whole blocks")))?;
    let row_bytes = layout.nb * size_of::<K::Block>();
    if rows > GROUP_ROWS || group_len < layout.bytes || (plain_len > 0 && plain_len < rows * row_bytes) {
        return Err(bad(format!(
            "{what}: {rows} {dtype} rows of {k} values need {} plain and {} repacked bytes, got {plain_len} and {group_len}",
            rows * row_bytes,
            layout.bytes
        )));
    }
    Ok(layout)
}

/// A [`KRecord`] type as the driver and the buffer see it.
pub(crate) struct Records<K>(PhantomData<K>);

impl<K: KRecord> Repacked for Records<K> {
    type Block = K::Block;
    type Act = BlockQ8K;

    fn group_layout(k: usize) -> Option<GroupLayout> {
        group_layout::<K>(k)
    }

    fn column_layout(k: usize) -> ColumnLayout {
        column_layout::<K>(k)
    }

    fn prepare_column(_isa: Isa, a: &[BlockQ8K], layout: &ColumnLayout, out: &mut [u8]) {
        let (qs, rest) = out.split_at_mut(layout.d_at);
        let (d, aux) = rest.split_at_mut(layout.aux_at - layout.d_at);
        for (b, blk) in a.iter().enumerate().take(layout.nb) {
            qs[SUPER * b..SUPER * (b + 1)].copy_from_slice(bytemuck::cast_slice(&blk.qs));
            d[4 * b..4 * b + 4].copy_from_slice(&blk.d.to_le_bytes());
            K::aux(blk, &mut aux[K::AUX * b..K::AUX * (b + 1)]);
        }
    }

    fn pack(k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
        let layout = check::<K>(k, rows, plain.len(), out.len(), "repack")?;
        // Padding rows (a short last group) are zero: scales 0, so they add nothing.
        out[..layout.bytes].fill(0);
        let row_bytes = layout.nb * size_of::<K::Block>();
        for r in 0..rows {
            let blocks: &[K::Block] = bytemuck::cast_slice(&plain[r * row_bytes..(r + 1) * row_bytes]);
            for (b, blk) in blocks.iter().enumerate() {
                K::pack_block(blk, r, &mut out[b * K::RECORD..(b + 1) * K::RECORD]);
            }
        }
        Ok(())
    }

    fn unpack(k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()> {
        let layout = check::<K>(k, rows, plain.len(), group.len(), "unrepack")?;
        let row_bytes = layout.nb * size_of::<K::Block>();
        for r in 0..rows {
            let blocks: &mut [K::Block] = bytemuck::cast_slice_mut(&mut plain[r * row_bytes..(r + 1) * row_bytes]);
            for (b, blk) in blocks.iter_mut().enumerate() {
                *blk = K::block_of(&group[b * K::RECORD..(b + 1) * K::RECORD], r);
            }
        }
        Ok(())
    }

    fn dequantize(k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()> {
        check::<K>(k, r + 1, 0, group.len(), "dequantize")?;
        if out.len() < k {
            return Err(Error::InvalidOp {
                op: "CPU_REPACK",
                reason: format!("a row of {k} values does not fit in {} values", out.len()),
            });
        }
        for (b, chunk) in out[..k].chunks_exact_mut(SUPER).enumerate() {
            K::block_of(&group[b * K::RECORD..(b + 1) * K::RECORD], r).dequantize(chunk);
        }
        Ok(())
    }

    unsafe fn run_job(isa: Isa, job: &Job) {
        // SAFETY: the caller's contract.
        unsafe { K::run_job(isa, job) }
    }
}
