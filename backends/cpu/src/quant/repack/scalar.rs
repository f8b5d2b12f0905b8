//! The reference kernel of the repacked layout, in portable Rust: every
//! SIMD kernel computes exactly this, lane by lane (the same exact integer
//! sum per row and block, then the same fused multiply-adds in the same
//! order), so their results are compared bit for bit with it.

use half::f16;

use super::Job;
use super::layout::{ColumnLayout, GROUP_ROWS, GroupLayout, RepackType};

fn f32_at(bytes: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn f16_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// The 16 rows of one group times one prepared column.
///
/// Per block: `acc += (Σ (u − OFFSET)·a) · (d·d')` as one fused
/// multiply-add; with a min, `acc_m += m · s'` (a second chain, added at the
/// end).
pub(crate) fn group_product<R: RepackType>(
    group: &[u8],
    layout: &GroupLayout,
    col: &[u8],
    cl: &ColumnLayout,
) -> [f32; GROUP_ROWS] {
    let mut acc = [0f32; GROUP_ROWS];
    let mut acc_m = [0f32; GROUP_ROWS];
    for b in 0..layout.nb {
        let sc = &group[b * layout.scale_stride..(b + 1) * layout.scale_stride];
        let q = &group[layout.quants_at + b * layout.quant_stride..][..layout.quant_stride];
        let a: &[i8] = bytemuck::cast_slice(&col[32 * b..32 * b + 32]);
        let da = f32_at(col, cl.d_at + 4 * b);
        for r in 0..GROUP_ROWS {
            let mut isum = 0i32;
            for (i, &ai) in a.iter().enumerate() {
                let u = if R::NIBBLES {
                    let nibble = (q[GroupLayout::quant_byte(r, i % 16)] >> (4 * (i / 16))) & 0x0F;
                    // Value i's fifth bit: byte i % 4 of the row's plane, bit 2·(i % 16 / 4) + i / 16.
                    let fifth = if R::FIFTH {
                        (q[GroupLayout::fifth_at(r, i % 4)] >> (2 * (i % 16 / 4) + i / 16)) & 1
                    } else {
                        0
                    };
                    nibble | (fifth << 4)
                } else {
                    q[GroupLayout::quant_byte(r, i)]
                };
                isum += (i32::from(u) - R::OFFSET) * i32::from(ai);
            }
            let dw = f16_at(sc, 2 * r);
            acc[r] = (isum as f32).mul_add(dw * da, acc[r]);
            if R::HAS_MIN {
                let mw = f16_at(sc, 2 * (GROUP_ROWS + r));
                acc_m[r] = mw.mul_add(f32_at(col, cl.aux_at + 4 * b), acc_m[r]);
            }
        }
    }
    if R::HAS_MIN {
        for (a, m) in acc.iter_mut().zip(acc_m) {
            *a += m;
        }
    }
    acc
}

/// Runs `job` with [`group_product`].
///
/// # Safety
/// As [`Job`] says.
pub(crate) unsafe fn run<R: RepackType>(job: &Job) {
    for g in job.groups.clone() {
        // SAFETY: group g lies inside the matrix (the job's contract).
        let group = unsafe { std::slice::from_raw_parts(job.data.add(g * job.layout.bytes), job.layout.bytes) };
        let rows = job.rows_of(g);
        for j in job.cols.clone() {
            // SAFETY: column j is prepared in the job's columns (its contract).
            let col = unsafe { std::slice::from_raw_parts(job.col(j), job.col_layout.bytes) };
            let v = group_product::<R>(group, &job.layout, col, &job.col_layout);
            for (r, &x) in v.iter().enumerate().take(rows) {
                // SAFETY: (row 16g + r, column j) is inside dst and this job's (its contract).
                unsafe { *job.out(g, j).add(r) = x };
            }
        }
    }
}
