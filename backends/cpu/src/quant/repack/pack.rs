//! Plain rows into the repacked layout and back, bit for bit (see
//! [`super::layout`]), and single rows read out of it (GET_ROWS).

use gantry_engine::quant::{F16Bits, QuantBlock};
use gantry_engine::{DType, Error, Result};

use super::layout::{GROUP_ROWS, GroupLayout, RepackType, Repacked, fifth_bits, fifth_byte, with_repack_type};

/// Block `b` of row `r` of a group, rebuilt as the plain block.
fn block_of<R: RepackType>(layout: &GroupLayout, group: &[u8], r: usize, b: usize) -> R::Block {
    let sc = &group[b * layout.scale_stride..(b + 1) * layout.scale_stride];
    let mut headers = [F16Bits::default(); 2];
    for (h, header) in headers.iter_mut().enumerate().take(R::HEADERS) {
        let at = 2 * (GROUP_ROWS * h + r);
        *header = F16Bits([sc[at], sc[at + 1]]);
    }
    let q = &group[layout.quants_at + b * layout.quant_stride..layout.quants_at + (b + 1) * layout.quant_stride];
    let mut quants = [0u8; 32];
    for (j, v) in quants[..R::QS].iter_mut().enumerate() {
        *v = q[GroupLayout::quant_byte(r, j)] ^ R::FLIP;
    }
    let fifth = if R::FIFTH { fifth_bits(std::array::from_fn(|t| q[GroupLayout::fifth_at(r, t)])) } else { 0 };
    R::block(headers, &quants[..R::QS], fifth)
}

pub(super) fn pack<R: RepackType>(k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
    let layout = check::<R>(k, rows, plain.len(), out.len(), "repack")?;
    // Padding rows (a short last group) are zero: scale 0, so they add nothing.
    out[..layout.bytes].fill(0);
    let row_bytes = layout.nb * size_of::<R::Block>();
    for r in 0..rows {
        let blocks: &[R::Block] = bytemuck::cast_slice(&plain[r * row_bytes..(r + 1) * row_bytes]);
        for (b, blk) in blocks.iter().enumerate() {
            let headers = R::headers(blk);
            let sc = &mut out[b * layout.scale_stride..(b + 1) * layout.scale_stride];
            for (h, header) in headers.iter().enumerate().take(R::HEADERS) {
                let at = 2 * (GROUP_ROWS * h + r);
                sc[at..at + 2].copy_from_slice(&header.0);
            }
            let q = &mut out[layout.quants_at + b * layout.quant_stride..][..layout.quant_stride];
            for (j, &v) in R::quants(blk).iter().enumerate() {
                q[GroupLayout::quant_byte(r, j)] = v ^ R::FLIP;
            }
            if R::FIFTH {
                for t in 0..4 {
                    q[GroupLayout::fifth_at(r, t)] = fifth_byte(R::fifth(blk), t);
                }
            }
        }
    }
    Ok(())
}

pub(super) fn unpack<R: RepackType>(k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()> {
    let layout = check::<R>(k, rows, plain.len(), group.len(), "unrepack")?;
    let row_bytes = layout.nb * size_of::<R::Block>();
    for r in 0..rows {
        let blocks: &mut [R::Block] = bytemuck::cast_slice_mut(&mut plain[r * row_bytes..(r + 1) * row_bytes]);
        for (b, blk) in blocks.iter_mut().enumerate() {
            *blk = block_of::<R>(&layout, group, r, b);
        }
    }
    Ok(())
}

pub(super) fn dequantize<R: RepackType>(k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()> {
    let layout = check::<R>(k, r + 1, 0, group.len(), "dequantize")?;
    if out.len() < k {
        return Err(bad(format!("a row of {k} values does not fit in {} values", out.len())));
    }
    for (b, chunk) in out[..k].chunks_exact_mut(R::Block::ELEMS).enumerate() {
        block_of::<R>(&layout, group, r, b).dequantize(chunk);
    }
    Ok(())
}

pub(super) fn bad(reason: String) -> Error {
    Error::InvalidOp { op: "CPU_REPACK", reason }
}

/// The layout of one group of `rows` rows of `k` values, checked against a
/// plain side of `plain_len` bytes (0: not checked) and a repacked side of
/// `group_len` bytes.
fn check<R: RepackType>(k: usize, rows: usize, plain_len: usize, group_len: usize, what: &str) -> Result<GroupLayout> {
    let dtype = <R::Block as QuantBlock>::DTYPE;
    let layout = GroupLayout::new::<R>(k)
        .ok_or_else(|| bad(format!("{what}: {dtype} rows of {k} values are not whole blocks")))?;
    let row_bytes = layout.nb * size_of::<R::Block>();
    if rows > GROUP_ROWS || group_len < layout.bytes || (plain_len > 0 && plain_len < rows * row_bytes) {
        return Err(bad(format!(
            "{what}: {rows} {dtype} rows of {k} values need {} plain and {} repacked bytes, got {plain_len} and {group_len}",
            rows * row_bytes,
            layout.bytes
        )));
    }
    Ok(layout)
}

fn unsupported(dtype: DType) -> Error {
    Error::UnsupportedDType { what: "repacked weights".into(), dtype }
}

/// Repacks `rows` (at most [`GROUP_ROWS`]) plain `dtype` rows of `k` values
/// (`plain`, one after the other) into one group (`out`, its first
/// [`super::repacked_size`]`(dtype, k, 1)` bytes); rows past `rows` are zero.
pub fn repack_group(dtype: DType, k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
    fn run<R: Repacked>(k: usize, rows: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
        R::pack(k, rows, plain, out)
    }
    with_repack_type!(dtype, run(k, rows, plain, out)).ok_or_else(|| unsupported(dtype))?
}

/// The inverse of [`repack_group`]: the first `rows` rows of the group
/// `group` back into plain `dtype` rows in `plain`, the same bytes.
pub fn unrepack_group(dtype: DType, k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()> {
    fn run<R: Repacked>(k: usize, rows: usize, group: &[u8], plain: &mut [u8]) -> Result<()> {
        R::unpack(k, rows, group, plain)
    }
    with_repack_type!(dtype, run(k, rows, group, plain)).ok_or_else(|| unsupported(dtype))?
}

/// Dequantizes row `r` (below [`GROUP_ROWS`]) of the repacked group `group`
/// of `dtype` rows of `k` values into `out[..k]`: the values the plain row
/// dequantizes to, bit for bit.
pub fn dequantize_repacked_row(dtype: DType, k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()> {
    fn run<R: Repacked>(k: usize, group: &[u8], r: usize, out: &mut [f32]) -> Result<()> {
        R::dequantize(k, group, r, out)
    }
    with_repack_type!(dtype, run(k, group, r, out)).ok_or_else(|| unsupported(dtype))?
}

/// Repacks a whole matrix of `m` plain rows of `k` values (`plain`, dense)
/// into `out` ([`super::repacked_size`]`(dtype, k, m)` bytes).
pub fn repack_matrix(dtype: DType, k: usize, m: usize, plain: &[u8], out: &mut [u8]) -> Result<()> {
    let group_bytes = super::repacked_size(dtype, k, 1).ok_or_else(|| unsupported(dtype))?;
    let row_bytes = dtype.row_size(k).ok_or_else(|| unsupported(dtype))?;
    let need = super::repacked_size(dtype, k, m).unwrap_or(usize::MAX);
    if plain.len() < m * row_bytes || out.len() < need {
        return Err(bad(format!(
            "repack: {m} {dtype} rows of {k} values need {} plain and {need} repacked bytes, got {} and {}",
            m * row_bytes,
            plain.len(),
            out.len()
        )));
    }
    for (g, first) in (0..m).step_by(GROUP_ROWS).enumerate() {
        let rows = (m - first).min(GROUP_ROWS);
        let group = &mut out[g * group_bytes..(g + 1) * group_bytes];
        repack_group(dtype, k, rows, &plain[first * row_bytes..(first + rows) * row_bytes], group)?;
    }
    Ok(())
}

/// The inverse of [`repack_matrix`].
pub fn unrepack_matrix(dtype: DType, k: usize, m: usize, repacked: &[u8], plain: &mut [u8]) -> Result<()> {
    let group_bytes = super::repacked_size(dtype, k, 1).ok_or_else(|| unsupported(dtype))?;
    let row_bytes = dtype.row_size(k).ok_or_else(|| unsupported(dtype))?;
    let need = super::repacked_size(dtype, k, m).unwrap_or(usize::MAX);
    if plain.len() < m * row_bytes || repacked.len() < need {
        return Err(bad(format!(
            "unrepack: {m} {dtype} rows of {k} values need {} plain and {need} repacked bytes, got {} and {}",
            m * row_bytes,
            plain.len(),
            repacked.len()
        )));
    }
    for (g, first) in (0..m).step_by(GROUP_ROWS).enumerate() {
        let rows = (m - first).min(GROUP_ROWS);
        let group = &repacked[g * group_bytes..(g + 1) * group_bytes];
        unrepack_group(dtype, k, rows, group, &mut plain[first * row_bytes..(first + rows) * row_bytes])?;
    }
    Ok(())
}
