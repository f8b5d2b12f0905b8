//! Cases for the ops that make values: ARANGE (no inputs) and
//! TIMESTEP_EMBEDDING (even and odd lengths, diffusion-sized timesteps).

use gantry_engine::DType;

use crate::{Built, Case, Init, Tolerance};

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for (start, stop, step) in [(0.0, 10.0, 1.0), (-3.0, 5.5, 0.25), (1.0, 2.0, 0.3), (0.0, 1000.0, 7.0)] {
        let name = format!("ARANGE(start={start},stop={stop},step={step})");
        cases.push(Case::new("ARANGE", name, move |ctx| Ok(Built::output(ctx.arange(start, stop, step)?))));
    }
    for (n, dim, max_period) in [(2, 128, 10000), (7, 15, 10000), (1, 2, 100), (4, 320, 1000)] {
        let name = format!("TIMESTEP_EMBEDDING(n={n},dim={dim},max_period={max_period})");
        cases.push(
            Case::new("TIMESTEP_EMBEDDING", name, move |ctx| {
                let t = ctx.tensor(DType::F32, [n])?;
                Ok(Built::output(ctx.timestep_embedding(t, dim, max_period)?)
                    .init(t, Init::Uniform { lo: 0.0, hi: 1000.0 }))
            })
            .tolerance(Tolerance::Nmse(1e-6)),
        );
    }
    cases
}
