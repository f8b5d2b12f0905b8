//! Cases for FLASH_ATTN_EXT: head sizes, odd key counts, one and several
//! queries (prompt batches of several query tiles), grouped-query broadcast, masks (F16, F32, broadcast), ALiBi,
//! soft-capping, F32, F16 and Q8_0 K / V, attention sinks (gpt-oss) on the
//! one-query and the tiled paths.

use gantry_engine::DType;

use crate::{Built, Case, Init, Tolerance};

/// ggml's tolerance for FLASH_ATTN_EXT.
const FLASH_ATTN_NMSE: f64 = 5e-4;

#[derive(Debug, Clone, Copy)]
struct Fa {
    dk: usize,
    dv: usize,
    n_kv: usize,
    n_q: usize,
    n_head: usize,
    n_head_kv: usize,
    n_batch: usize,
    mask: Option<(DType, bool)>,
    max_bias: f32,
    softcap: f32,
    kv_type: DType,
    /// One sink logit per head.
    sinks: bool,
}

fn fa_case(p: Fa) -> Case {
    let mask = p.mask.map_or("none".to_string(), |(t, b)| format!("{t}{}", if b { ",bcast" } else { "" }));
    let name = format!(
        "FLASH_ATTN_EXT(dk={},dv={},n_kv={},n_q={},n_head={},n_head_kv={},n_batch={},mask={mask},max_bias={},softcap={},type_kv={})",
        p.dk, p.dv, p.n_kv, p.n_q, p.n_head, p.n_head_kv, p.n_batch, p.max_bias, p.softcap, p.kv_type
    ) + if p.sinks { ",sinks" } else { "" };
    let flops = 2.0 * (p.dk + p.dv) as f64 * (p.n_kv * p.n_q * p.n_head * p.n_batch) as f64;
    Case::new("FLASH_ATTN_EXT", name, move |ctx| {
        let q = ctx.tensor(DType::F32, [p.dk, p.n_q, p.n_head, p.n_batch])?;
        let k = ctx.tensor(p.kv_type, [p.dk, p.n_kv, p.n_head_kv, p.n_batch])?;
        let v = ctx.tensor(p.kv_type, [p.dv, p.n_kv, p.n_head_kv, p.n_batch])?;
        let m = match p.mask {
            Some((t, bcast)) => {
                let ne = if bcast { [p.n_kv, p.n_q + 2, 1, 1] } else { [p.n_kv, p.n_q + 2, p.n_head, p.n_batch] };
                Some(ctx.tensor(t, ne)?)
            }
            None => None,
        };
        let scale = 1.0 / (p.dk as f32).sqrt();
        let built = if p.sinks {
            let sinks = ctx.tensor(DType::F32, [p.n_head])?;
            let out = ctx.flash_attn_ext_sinks(q, k, v, m, sinks, scale, p.max_bias, p.softcap)?;
            Built::output(out).init(sinks, Init::Uniform { lo: -2.0, hi: 3.0 })
        } else {
            let out = ctx.flash_attn_ext(q, k, v, m, scale, p.max_bias, p.softcap)?;
            Built::output(out)
        };
        Ok(match m {
            Some(m) => built.init(m, Init::Mask { p_inf: 0.25 }),
            None => built,
        })
    })
    .tolerance(Tolerance::Nmse(FLASH_ATTN_NMSE))
    .flops(flops)
}

pub fn cases() -> Vec<Case> {
    let base = Fa {
        dk: 64,
        dv: 64,
        n_kv: 113,
        n_q: 7,
        n_head: 4,
        n_head_kv: 4,
        n_batch: 1,
        mask: Some((DType::F16, true)),
        max_bias: 0.0,
        softcap: 0.0,
        kv_type: DType::F16,
        sinks: false,
    };
    let mut cases = Vec::new();
    for kv_type in [DType::F32, DType::F16] {
        let b = Fa { kv_type, ..base };
        let variants = [
            b,
            Fa { n_q: 1, ..b },
            Fa { n_kv: 64, ..b },
            Fa { n_kv: 1, mask: None, ..b },
            Fa { dk: 128, dv: 128, ..b },
            Fa { dk: 80, dv: 80, n_q: 3, ..b },
            Fa { dk: 128, dv: 64, ..b },
            Fa { n_head_kv: 2, ..b },
            Fa { n_head_kv: 1, n_q: 1, ..b },
            Fa { n_batch: 2, n_head_kv: 2, ..b },
            Fa { mask: None, ..b },
            Fa { mask: Some((DType::F32, true)), ..b },
            Fa { mask: Some((DType::F16, false)), n_batch: 2, ..b },
            Fa { max_bias: 8.0, ..b },
            Fa { max_bias: 8.0, n_head: 6, n_head_kv: 3, ..b },
            Fa { softcap: 10.0, ..b },
            Fa { softcap: 10.0, max_bias: 8.0, mask: Some((DType::F32, false)), ..b },
            // Prompt batches: several query tiles (a short last one) of a
            // grouped-query group, and a head size larger than a tile's block.
            Fa { n_q: 45, n_kv: 150, n_head: 9, n_head_kv: 3, ..b },
            Fa { dk: 256, dv: 256, n_q: 12, n_head: 4, n_head_kv: 1, ..b },
            // Attention sinks: one query (rows), a prompt batch (tiles), no
            // mask, and with soft-capping and ALiBi.
            Fa { sinks: true, ..b },
            Fa { sinks: true, n_q: 1, ..b },
            Fa { sinks: true, n_q: 45, n_kv: 150, n_head: 9, n_head_kv: 3, ..b },
            Fa { sinks: true, mask: None, ..b },
            Fa { sinks: true, softcap: 10.0, max_bias: 8.0, mask: Some((DType::F32, false)), ..b },
        ];
        cases.extend(variants.into_iter().map(fa_case));
    }
    // A Q8_0 KV cache (`--kv-type q8_0`): rows dequantized as they are read.
    let q8 = Fa { kv_type: DType::Q8_0, ..base };
    let q8_variants = [
        q8,
        Fa { n_q: 1, ..q8 },
        Fa { n_head_kv: 1, dk: 256, dv: 256, ..q8 },
        Fa { softcap: 10.0, ..q8 },
        Fa { sinks: true, ..q8 },
    ];
    cases.extend(q8_variants.into_iter().map(fa_case));
    let perf =
        Fa { dk: 128, dv: 128, n_kv: 4096, n_q: 1, n_head: 32, n_head_kv: 8, mask: Some((DType::F16, true)), ..base };
    cases.push(fa_case(perf).perf_only());
    cases.push(fa_case(Fa { n_q: 64, n_kv: 1024, ..perf }).perf_only());
    cases
}
