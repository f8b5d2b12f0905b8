//! The reference kernel of the repacked Q6_K layout ([`super::q6k_layout`]),
//! in portable Rust: every SIMD kernel computes exactly this, lane by lane
//! (the same exact integer per row and super-block, then the same fused
//! multiply-add), so their results are compared bit for bit with it.

use half::f16;

use super::Job;
use super::k_records::SUPER;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout};
use super::q6k_layout::{AUX, D, QH, QL, RECORD, SC, plane_byte};

fn f32_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Quant `u = q + 32` (0..64) of value `128h + 32f + l` of row `r`.
fn quant(rec: &[u8], r: usize, h: usize, f: usize, l: usize) -> u8 {
    let low = (rec[plane_byte(QL, r, 64 * h + 32 * (f % 2) + l)] >> (4 * (f / 2))) & 0x0F;
    let high = (rec[plane_byte(QH, r, 32 * h + l)] >> (2 * f)) & 3;
    low | (high << 4)
}

/// The 16 rows of one group times one prepared column.
///
/// Per super-block and row: `isum = Σ_g sc_g·(−32·bs_g + Σ u·a)` (an exact
/// integer: at most 16·128·(63 + 32)·128·16 in size), then `acc += isum·(d·d')`
/// as one fused multiply-add.
pub(crate) fn group_product(group: &[u8], layout: &GroupLayout, col: &[u8], cl: &ColumnLayout) -> [f32; GROUP_ROWS] {
    let mut acc = [0f32; GROUP_ROWS];
    for b in 0..layout.nb {
        let rec = &group[b * RECORD..(b + 1) * RECORD];
        let a: &[i8] = bytemuck::cast_slice(&col[SUPER * b..SUPER * (b + 1)]);
        let da = f32_at(col, cl.d_at + 4 * b);
        for (r, acc) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            for g in 0..16 {
                let (h, f, part) = (g / 8, (g % 8) / 2, g % 2);
                let mut s = i32_at(col, cl.aux_at + AUX * b + 4 * g);
                for i in 0..16 {
                    let l = 16 * part + i;
                    s += i32::from(quant(rec, r, h, f, l)) * i32::from(a[16 * g + i]);
                }
                isum += i32::from(rec[SC + 16 * g + r] as i8) * s;
            }
            let d = f16::from_le_bytes([rec[D + 2 * r], rec[D + 2 * r + 1]]).to_f32();
            *acc = (isum as f32).mul_add(d * da, *acc);
        }
    }
    acc
}

/// Runs `job` with [`group_product`].
///
/// # Safety
/// As [`Job`] says.
pub(crate) unsafe fn run(job: &Job) {
    for g in job.groups.clone() {
        // SAFETY: group g lies inside the matrix (the job's contract).
        let group = unsafe { std::slice::from_raw_parts(job.data.add(g * job.layout.bytes), job.layout.bytes) };
        let rows = job.rows_of(g);
        for j in job.cols.clone() {
            // SAFETY: column j is prepared in the job's columns (its contract).
            let col = unsafe { std::slice::from_raw_parts(job.col(j), job.col_layout.bytes) };
            let v = group_product(group, &job.layout, col, &job.col_layout);
            for (r, &x) in v.iter().enumerate().take(rows) {
                // SAFETY: (row 16g + r, column j) is inside dst and this job's (its contract).
                unsafe { *job.out(g, j).add(r) = x };
            }
        }
    }
}
