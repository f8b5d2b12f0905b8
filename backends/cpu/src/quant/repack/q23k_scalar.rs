//! The reference kernel of the repacked Q2_K and Q3_K layouts
//! ([`super::q23k_layout`]), in portable Rust: every SIMD kernel computes
//! exactly this, lane by lane (the same exact integers per row and
//! super-block, then the same fused multiply-adds in the same order), so
//! their results are compared bit for bit with it.

use half::f16;

use super::Job;
use super::k_records::SUPER;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout};
use super::q6k_layout::plane_byte;
use super::q23k_layout::{
    Q2_AUX, Q2_D, Q2_DMIN, Q2_MINS, Q2_QS, Q2_RECORD, Q2_SC, Q3_AUX, Q3_D, Q3_HM, Q3_QS, Q3_RECORD, Q3_SC,
};

fn f32_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// Quant `q` of value `128h + 32f + l` of row `r`: 0..4 (Q2_K), 0..8 with
/// the high bit (Q3_K).
fn quant<const Q3: bool>(rec: &[u8], r: usize, h: usize, f: usize, l: usize) -> u8 {
    let qs = if Q3 { Q3_QS } else { Q2_QS };
    let low = (rec[plane_byte(qs, r, 32 * h + l)] >> (2 * f)) & 3;
    if Q3 { low | (((rec[plane_byte(Q3_HM, r, l)] >> (4 * h + f)) & 1) << 2) } else { low }
}

/// The 16 rows of one group times one prepared column (Q3_K when `Q3`).
///
/// Per super-block and row: `isum = Σ_g sc_g·(start_g + Σ q·a)` with
/// `start_g = −4·bs_g` for Q3_K and 0 for Q2_K, and for Q2_K
/// `msum = Σ_g m_g·bs_g` (exact integers), then `acc += isum·(d·d')` and,
/// for Q2_K, `acc −= msum·(dmin·d')`, each one fused multiply-add.
pub(crate) fn group_product<const Q3: bool>(
    group: &[u8],
    layout: &GroupLayout,
    col: &[u8],
    cl: &ColumnLayout,
) -> [f32; GROUP_ROWS] {
    let (record, aux_bytes) = if Q3 { (Q3_RECORD, Q3_AUX) } else { (Q2_RECORD, Q2_AUX) };
    let sc_at = if Q3 { Q3_SC } else { Q2_SC };
    let mut acc = [0f32; GROUP_ROWS];
    for b in 0..layout.nb {
        let rec = &group[b * record..(b + 1) * record];
        let a: &[i8] = bytemuck::cast_slice(&col[SUPER * b..SUPER * (b + 1)]);
        let da = f32_at(col, cl.d_at + 4 * b);
        let aux = &col[cl.aux_at + aux_bytes * b..cl.aux_at + aux_bytes * (b + 1)];
        for (r, acc) in acc.iter_mut().enumerate() {
            let mut isum = 0i32;
            let mut msum = 0i32;
            for g in 0..16 {
                let (h, f, part) = (g / 8, (g % 8) / 2, g % 2);
                let mut s = if Q3 {
                    i32::from_le_bytes([aux[4 * g], aux[4 * g + 1], aux[4 * g + 2], aux[4 * g + 3]])
                } else {
                    0
                };
                for i in 0..16 {
                    s += i32::from(quant::<Q3>(rec, r, h, f, 16 * part + i)) * i32::from(a[16 * g + i]);
                }
                isum += i32::from(rec[sc_at + 16 * g + r] as i8) * s;
                if !Q3 {
                    let bs = i16::from_le_bytes([aux[2 * g], aux[2 * g + 1]]);
                    msum += i32::from(rec[Q2_MINS + 32 * (g / 2) + 2 * r + g % 2]) * i32::from(bs);
                }
            }
            if Q3 {
                *acc = (isum as f32).mul_add(f16_at(rec, Q3_D + 2 * r) * da, *acc);
            } else {
                let (d, dmin) = (f16_at(rec, Q2_D + 2 * r), f16_at(rec, Q2_DMIN + 2 * r));
                *acc = (isum as f32).mul_add(d * da, *acc);
                *acc = (-(msum as f32)).mul_add(dmin * da, *acc);
            }
        }
    }
    acc
}

/// Runs `job` with [`group_product`].
///
/// # Safety
/// As [`Job`] says.
pub(crate) unsafe fn run<const Q3: bool>(job: &Job) {
    for g in job.groups.clone() {
        // SAFETY: group g lies inside the matrix (the job's contract).
        let group = unsafe { std::slice::from_raw_parts(job.data.add(g * job.layout.bytes), job.layout.bytes) };
        let rows = job.rows_of(g);
        for j in job.cols.clone() {
            // SAFETY: column j is prepared in the job's columns (its contract).
            let col = unsafe { std::slice::from_raw_parts(job.col(j), job.col_layout.bytes) };
            let v = group_product::<Q3>(group, &job.layout, col, &job.col_layout);
            for (r, &x) in v.iter().enumerate().take(rows) {
                // SAFETY: (row 16g + r, column j) is inside dst and this job's (its contract).
                unsafe { *job.out(g, j).add(r) = x };
            }
        }
    }
}
