//! One conformance case: how to build its graph, how to fill its inputs,
//! and how closely results must agree.

use std::sync::Arc;

use gantry_engine::{Context, DType, Result, SplitMix64, TensorDesc, TensorId};

/// How an input tensor is filled (from a generator seeded by the case).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Init {
    /// Uniform floats in `[lo, hi)`.
    Uniform {
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// Uniform integers in `[lo, hi)` (indices, positions).
    Integers {
        /// Lower bound.
        lo: i32,
        /// Upper bound (exclusive).
        hi: i32,
    },
    /// Along dim 0, distinct integers in `[0, n)`, a new draw per row
    /// (SET_ROWS indices: no row written twice).
    DistinctIndices {
        /// Values are below this.
        n: usize,
    },
    /// Each row a shuffle of distinct integers centred on 0, so each row
    /// has one largest element exactly representable in every float dtype
    /// (ARGMAX).
    DistinctRows,
    /// An attention mask: uniform in `[-1, 1)`, with `-inf` at about a
    /// `p_inf` share of positions, never the first of a row.
    Mask {
        /// Share of `-inf` entries.
        p_inf: f32,
    },
}

impl Init {
    /// The default for a dtype: uniform in `[-1, 1)` for floats, integers
    /// in `[-1000, 1000)` for I32.
    pub fn default_for(dtype: DType) -> Self {
        match dtype {
            DType::I32 => Init::Integers { lo: -1000, hi: 1000 },
            _ => Init::Uniform { lo: -1.0, hi: 1.0 },
        }
    }

    /// Values for a contiguous tensor described by `desc`, in memory order.
    pub fn generate(&self, desc: &TensorDesc, rng: &mut SplitMix64) -> Vec<f32> {
        let n = desc.nelements();
        let n0 = desc.ne[0].max(1);
        match *self {
            Init::Uniform { lo, hi } => (0..n).map(|_| lo + (hi - lo) * rng.unit()).collect(),
            Init::Integers { lo, hi } => {
                (0..n).map(|_| rng.below((hi - lo).max(1) as u64) as i32 + lo).map(|v| v as f32).collect()
            }
            Init::DistinctIndices { n: limit } => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n / n0 {
                    let mut pool: Vec<usize> = (0..limit).collect();
                    for i in 0..n0 {
                        let j = i + rng.below((limit - i) as u64) as usize;
                        pool.swap(i, j);
                        out.push(pool[i] as f32);
                    }
                }
                out
            }
            Init::DistinctRows => {
                let mut out = Vec::with_capacity(n);
                for _ in 0..n / n0 {
                    let mut row: Vec<f32> = (0..n0).map(|i| i as f32 - (n0 / 2) as f32).collect();
                    for i in (1..n0).rev() {
                        row.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    out.extend(row);
                }
                out
            }
            Init::Mask { p_inf } => (0..n)
                .map(|i| {
                    let masked = i % n0 != 0 && rng.unit() < p_inf;
                    if masked { f32::NEG_INFINITY } else { rng.unit() * 2.0 - 1.0 }
                })
                .collect(),
        }
    }
}

/// What a case's builder returns: the tensor to compare and the inputs
/// that need more than the default fill.
#[derive(Debug, Clone)]
pub struct Built {
    /// The result compared between backend and reference.
    pub output: TensorId,
    /// Inputs (leafs) with their fill; other leafs get [`Init::default_for`].
    pub inits: Vec<(TensorId, Init)>,
}

impl Built {
    /// A result with default-filled inputs.
    pub fn output(output: TensorId) -> Self {
        Self { output, inits: Vec::new() }
    }

    /// Adds a fill for an input.
    pub fn init(mut self, t: TensorId, init: Init) -> Self {
        self.inits.push((t, init));
        self
    }

    /// The fill of leaf `t`.
    pub fn init_of(&self, t: TensorId, dtype: DType) -> Init {
        self.inits.iter().find(|(x, _)| *x == t).map_or(Init::default_for(dtype), |(_, i)| *i)
    }
}

/// How closely a backend must agree with the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// Normalized mean squared error at most this.
    Nmse(f64),
    /// Every element equal.
    Exact,
}

/// A graph builder, called once per side of a comparison.
pub type BuildFn = dyn Fn(&mut Context) -> Result<Built> + Send + Sync;

/// One conformance case.
#[derive(Clone)]
pub struct Case {
    /// The op under test, as ggml names it (`"MUL_MAT"`).
    pub op: &'static str,
    /// The op with its parameters (`"MUL_MAT(type_a=f16,m=16,n=1,k=256)"`), unique.
    pub name: String,
    /// Agreement required.
    pub tolerance: Tolerance,
    /// Floating point operations of one run (0: report bandwidth instead).
    pub flops: f64,
    /// Bytes one run moves, for the bandwidth of perf mode (0: the sizes of
    /// every input and result, which overstates ops that read a few rows).
    pub bytes: f64,
    /// Whether the case is for perf mode only (too large for every test run).
    pub perf_only: bool,
    /// Builds the graph in an empty context.
    pub build: Arc<BuildFn>,
}

impl Case {
    /// A test case with ggml's default tolerance (NMSE 1e-7).
    pub fn new(
        op: &'static str,
        name: String,
        build: impl Fn(&mut Context) -> Result<Built> + Send + Sync + 'static,
    ) -> Self {
        Self {
            op,
            name,
            tolerance: Tolerance::Nmse(1e-7),
            flops: 0.0,
            bytes: 0.0,
            perf_only: false,
            build: Arc::new(build),
        }
    }

    /// With another tolerance.
    pub fn tolerance(mut self, t: Tolerance) -> Self {
        self.tolerance = t;
        self
    }

    /// With a flop count for perf mode.
    pub fn flops(mut self, flops: f64) -> Self {
        self.flops = flops;
        self
    }

    /// With the bytes one run moves, for perf mode.
    pub fn bytes(mut self, bytes: f64) -> Self {
        self.bytes = bytes;
        self
    }

    /// Marked for perf mode only.
    pub fn perf_only(mut self) -> Self {
        self.perf_only = true;
        self
    }
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case").field("name", &self.name).field("tolerance", &self.tolerance).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic_and_in_range() {
        let d = TensorDesc::contiguous(DType::F32, [10, 6, 1, 1]).unwrap();
        let gen_with = |init: Init| init.generate(&d, &mut SplitMix64::from_name("case", 3));
        assert_eq!(gen_with(Init::default_for(DType::F32)), gen_with(Init::default_for(DType::F32)));
        assert_ne!(
            gen_with(Init::default_for(DType::F32)),
            Init::default_for(DType::F32).generate(&d, &mut SplitMix64::from_name("case", 4))
        );
        assert!(gen_with(Init::Uniform { lo: 0.5, hi: 2.0 }).iter().all(|&v| (0.5..2.0).contains(&v)));
        for row in gen_with(Init::DistinctIndices { n: 12 }).chunks(10) {
            let mut r = row.to_vec();
            r.sort_by(f32::total_cmp);
            r.dedup();
            assert_eq!(r.len(), 10);
            assert!(r.iter().all(|&v| (0.0..12.0).contains(&v) && v.fract() == 0.0));
        }
        for row in gen_with(Init::DistinctRows).chunks(10) {
            let max = row.iter().cloned().fold(f32::MIN, f32::max);
            assert_eq!(row.iter().filter(|&&v| v == max).count(), 1);
        }
        for row in gen_with(Init::Mask { p_inf: 0.9 }).chunks(10) {
            assert!(row[0].is_finite());
        }
    }
}
