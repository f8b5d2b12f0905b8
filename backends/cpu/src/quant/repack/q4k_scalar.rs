//! The reference kernel of the repacked Q4_K and Q5_K layouts ([`super::q4k_layout`]),
//! in portable Rust: every SIMD kernel computes exactly this, lane by lane
//! (the same exact integers per row and super-block, then the same two
//! fused multiply-adds in the same order), so their results are compared
//! bit for bit with it.

use half::f16;

use super::Job;
use super::k_records::SUPER;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout};
use super::q4k_layout::{AUX, D, DMIN, MINS, RECORD, RECORD5, SC, qh_byte, quant_byte};

fn f32_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// The 16 rows of one group times one prepared column (Q5_K when `FIFTH`).
///
/// Per super-block and row: `isum = Σ_j sc_j·Σ q·a` and `msum = Σ_j m_j·bs_j`
/// (exact integers), then `acc += isum·(d·d')` and `acc −= msum·(dmin·d')`,
/// each one fused multiply-add.
pub(crate) fn group_product<const FIFTH: bool>(
    group: &[u8],
    layout: &GroupLayout,
    col: &[u8],
    cl: &ColumnLayout,
) -> [f32; GROUP_ROWS] {
    let record = if FIFTH { RECORD5 } else { RECORD };
    let mut acc = [0f32; GROUP_ROWS];
    for b in 0..layout.nb {
        let rec = &group[b * record..(b + 1) * record];
        let a: &[i8] = bytemuck::cast_slice(&col[SUPER * b..SUPER * (b + 1)]);
        let da = f32_at(col, cl.d_at + 4 * b);
        let aux = &col[cl.aux_at + AUX * b..cl.aux_at + AUX * (b + 1)];
        for (r, acc) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            let mut msum = 0i32;
            for j in 0..8 {
                let mut s = 0i32;
                for i in 0..32 {
                    // Byte (pair j / 2, 4c + t) of the row: low nibble for even j, high for odd.
                    let byte = rec[quant_byte(r, 32 * (j / 2) + i)];
                    let mut q = (byte >> (4 * (j % 2))) & 0x0F;
                    if FIFTH {
                        // Q5_K: bit j of qh[i] is value 32j + i's fifth bit.
                        q |= ((rec[qh_byte(r, i)] >> j) & 1) << 4;
                    }
                    s += i32::from(q) * i32::from(a[32 * j + i]);
                }
                isum += i32::from(rec[SC + 16 * j + r]) * s;
                let bs = i16::from_le_bytes([aux[2 * j], aux[2 * j + 1]]);
                msum += i32::from(rec[MINS + 32 * (j / 2) + 2 * r + j % 2]) * i32::from(bs);
            }
            let (d, dmin) = (f16_at(rec, D + 2 * r), f16_at(rec, DMIN + 2 * r));
            *acc = (isum as f32).mul_add(d * da, *acc);
            *acc = (-(msum as f32)).mul_add(dmin * da, *acc);
        }
    }
    acc
}

/// Runs `job` with [`group_product`].
///
/// # Safety
/// As [`Job`] says.
pub(crate) unsafe fn run<const FIFTH: bool>(job: &Job) {
    for g in job.groups.clone() {
        // SAFETY: group g lies inside the matrix (the job's contract).
        let group = unsafe { std::slice::from_raw_parts(job.data.add(g * job.layout.bytes), job.layout.bytes) };
        let rows = job.rows_of(g);
        for j in job.cols.clone() {
            // SAFETY: column j is prepared in the job's columns (its contract).
            let col = unsafe { std::slice::from_raw_parts(job.col(j), job.col_layout.bytes) };
            let v = group_product::<FIFTH>(group, &job.layout, col, &job.col_layout);
            for (r, &x) in v.iter().enumerate().take(rows) {
                // SAFETY: (row 16g + r, column j) is inside dst and this job's (its contract).
                unsafe { *job.out(g, j).add(r) = x };
            }
        }
    }
}
