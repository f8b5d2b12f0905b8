//! ROPE: rotary position embedding, modes NORMAL (adjacent pairs) and NEOX
//! (pairs half a rotation apart), with YaRN scaling and frequency factors
//! (ggml's `rope_yarn` and `ggml_rope_yarn_corr_dims`).
//!
//! The angles of one token are computed once (in f64, so large positions
//! keep their precision) and shared by all heads of that token — and, with
//! the backend's [`super::rope_angles::RopeAngleMemo`], by every later node that rotates by the
//! same positions.

use std::sync::Mutex;

use gantry_engine::{Context, DType, Result, RopeMode, RopeParams, TensorDesc, TensorId};

use super::bound::Bound;
use super::rope_angles::RopeAngleMemo;
use super::{shape_err, src, src_desc};
use crate::parallel::Par;

pub fn supports(ctx: &Context, d: &TensorDesc) -> bool {
    let (Some(x), Some(pos)) = (src_desc(ctx, d, 0), src_desc(ctx, d, 1)) else { return false };
    let ff_ok = match d.srcs[2] {
        None => true,
        Some(_) => src_desc(ctx, d, 2).is_some_and(|f| f.dtype == DType::F32),
    };
    matches!(x.dtype, DType::F32 | DType::F16) && x.dtype == d.dtype && pos.dtype == DType::I32 && ff_ok
}

/// What the angles of every pair share for one call: `θ_i = position ·
/// theta_scale^i / factor_i`, the YaRN ramp and the magnitude scale.
struct Angles<'a> {
    p: &'a RopeParams,
    corr: [f32; 2],
    theta_scale: f64,
}

impl<'a> Angles<'a> {
    fn new(p: &'a RopeParams, corr: [f32; 2]) -> Self {
        // Once per call: a `powf` per pair was most of a decode step's ROPE time.
        Angles { p, corr, theta_scale: (p.freq_base as f64).powf(-2.0 / p.n_dims as f64) }
    }

    /// Cosine and sine (times the magnitude scale) of every pair at
    /// `position`, into `cache` (`[cos, sin]` per pair), each pair's
    /// frequency divided by `factor(pair)`.
    fn fill(&self, position: f64, cache: &mut [f32], factor: impl Fn(usize) -> f32) {
        let p = self.p;
        // θ_extrap of pair i is position · theta_scale^i: one multiplication
        // per pair, in f64 so large positions keep their precision.
        let mut theta_base = position;
        for (i, cs) in cache.chunks_exact_mut(2).enumerate() {
            let theta_extrap = theta_base / factor(i) as f64;
            theta_base *= self.theta_scale;
            let theta_interp = p.freq_scale as f64 * theta_extrap;
            let mut theta = theta_interp;
            let mut mscale = p.attn_factor as f64;
            if p.ext_factor != 0.0 {
                let y = (i as f32 - self.corr[0]) / (self.corr[1] - self.corr[0]).max(0.001);
                let ramp_mix = ((1.0 - y.clamp(0.0, 1.0)) * p.ext_factor) as f64;
                theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
                mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale as f64).ln();
            }
            let (sin, cos) = theta.sin_cos();
            cs[0] = (cos * mscale) as f32;
            cs[1] = (sin * mscale) as f32;
        }
    }
}

/// A ROPE node's sources, checked, and what its rows share: the positions,
/// the frequency factors and the angle constants. The ROPE kernel and the
/// fused ROPE + SET_ROWS both rotate rows through it.
pub(super) struct RopeRows<'a> {
    /// The rows to rotate.
    pub(super) x: Bound,
    pos: Bound,
    ff: Option<Bound>,
    p: &'a RopeParams,
    angles: Angles<'a>,
}

impl<'a> RopeRows<'a> {
    /// Binds ROPE node `t` (description `d`, parameters `p`) and checks its shapes.
    pub(super) fn bind(ctx: &Context, t: TensorId, d: &TensorDesc, p: &'a RopeParams) -> Result<Self> {
        let x = Bound::src(ctx, src(ctx, t, d, 0)?)?;
        let pos = Bound::src(ctx, src(ctx, t, d, 1)?)?;
        let ff = d.srcs[2].map(|f| Bound::src(ctx, f)).transpose()?;
        let (n0, n_dims) = (x.ne[0], p.n_dims);
        if x.ne != d.ne || pos.ne[0] != x.ne[2] || n_dims == 0 || n_dims % 2 != 0 || n_dims > n0 {
            return Err(shape_err(
                ctx,
                t,
                d,
                format!("{:?} with {} positions and n_dims {n_dims} do not fit", x.ne, pos.nelements()),
            ));
        }
        if let Some(f) = &ff
            && f.ne[0] < n_dims / 2
        {
            return Err(shape_err(ctx, t, d, format!("{} frequency factors for n_dims {n_dims}", f.ne[0])));
        }
        if p.freq_base.is_nan() || p.freq_base <= 0.0 {
            return Err(shape_err(ctx, t, d, format!("freq_base {}", p.freq_base)));
        }
        let corr = p.yarn_corr_dims();
        Ok(RopeRows { x, pos, ff, p, angles: Angles::new(p, corr) })
    }

    /// The node's parameters.
    pub(super) fn params(&self) -> &RopeParams {
        self.p
    }

    /// The number of tokens (= positions).
    pub(super) fn tokens(&self) -> usize {
        self.x.ne[2]
    }

    /// The position of token `i2`.
    pub(super) fn position(&self, i2: usize) -> i32 {
        debug_assert!(i2 < self.tokens());
        // SAFETY: i2 < ne[2] = the number of positions (checked at bind), read as I32.
        unsafe { *(self.pos.at(i2.min(self.tokens().saturating_sub(1)), 0, 0, 0) as *const i32) }
    }

    /// The frequency factor of pair `k` (1 without factors).
    fn factor(&self, k: usize) -> f32 {
        // SAFETY: k < n_dims / 2 <= the number of factors (checked at bind).
        self.ff.as_ref().map_or(1.0, |f| unsafe { f.get(k.min(self.p.n_dims / 2 - 1), 0, 0, 0) })
    }

    /// Whether `factors` are this node's frequency factors (empty: none).
    pub(super) fn factors_equal(&self, factors: &[f32]) -> bool {
        match &self.ff {
            None => factors.is_empty(),
            Some(_) => {
                factors.len() == self.p.n_dims / 2
                    && factors.iter().enumerate().all(|(k, &f)| f.to_bits() == self.factor(k).to_bits())
            }
        }
    }

    /// This node's frequency factors into `out` (empty: none).
    pub(super) fn copy_factors(&self, out: &mut Vec<f32>) {
        out.clear();
        if self.ff.is_some() {
            out.extend((0..self.p.n_dims / 2).map(|k| self.factor(k)));
        }
    }

    /// Floats of the angle cache [`RopeRows::token_angles`] fills.
    pub(super) fn cache_len(&self) -> usize {
        self.p.n_dims
    }

    /// The angles of token `i2` (every head of a token shares them) into `cache`.
    pub(super) fn token_angles(&self, i2: usize, cache: &mut [f32]) {
        self.angles.fill(self.position(i2) as f64, &mut cache[..self.p.n_dims], |k| self.factor(k));
    }

    /// The angles of every token, `n_dims` floats each: from the backend's
    /// `memo` ([`super::rope_angles::RopeAngleMemo`]) when it keeps one, which
    /// computes them once for every node that rotates by the same positions;
    /// `None` without a memo (the caller then computes each token's as it goes).
    pub(super) fn with_table<R>(
        &self,
        par: &Par<'_>,
        memo: Option<&Mutex<RopeAngleMemo>>,
        f: impl FnOnce(Option<&[f32]>) -> R,
    ) -> R {
        match memo {
            Some(memo) => {
                let mut memo = memo.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                f(Some(memo.table(self, par)))
            }
            None => f(None),
        }
    }

    /// The angles of token `i2`: its row of `table` when there is one (see
    /// [`RopeRows::with_table`]), else computed into `cache` unless
    /// `cached_token` says they are there already.
    pub(super) fn angles_of<'c>(
        &self,
        table: Option<&'c [f32]>,
        i2: usize,
        cache: &'c mut [f32],
        cached_token: &mut usize,
    ) -> &'c [f32] {
        let nd = self.cache_len();
        match table {
            Some(t) => &t[i2 * nd..(i2 + 1) * nd],
            None => {
                if *cached_token != i2 {
                    self.token_angles(i2, cache);
                    *cached_token = i2;
                }
                &cache[..nd]
            }
        }
    }

    /// Rotates the first `n_dims` values of `row` by the angles in `cache`.
    pub(super) fn rotate(&self, row: &mut [f32], cache: &[f32]) {
        let half = self.p.n_dims / 2;
        for k in 0..half {
            let (c, s) = (cache[2 * k], cache[2 * k + 1]);
            let (a, b) = match self.p.mode {
                RopeMode::Normal => (2 * k, 2 * k + 1),
                RopeMode::Neox => (k, k + half),
            };
            let (x0, x1) = (row[a], row[b]);
            row[a] = x0 * c - x1 * s;
            row[b] = x0 * s + x1 * c;
        }
    }
}

pub fn compute(
    ctx: &Context,
    t: TensorId,
    d: &TensorDesc,
    p: &RopeParams,
    par: &Par<'_>,
    angles: Option<&Mutex<RopeAngleMemo>>,
) -> Result<()> {
    let rope = RopeRows::bind(ctx, t, d, p)?;
    let dst = Bound::dst(ctx, t)?;
    let (x, n0) = (&rope.x, rope.x.ne[0]);
    let nd = rope.cache_len();
    rope.with_table(par, angles, |table| {
        par.for_each(x.nrows(), 4 * n0, n0 + nd, |rows, tmp| {
            let (row, cache) = tmp.split_at_mut(n0);
            let mut cached_token = usize::MAX;
            for r in rows {
                let [i1, i2, i3] = x.row_index(r);
                let angles = rope.angles_of(table, i2, cache, &mut cached_token);
                // SAFETY: indices in range; this thread owns row r of dst, read
                // completely before it is written.
                unsafe { x.load_row(i1, i2, i3, row) };
                rope.rotate(row, angles);
                // SAFETY: as above.
                unsafe { dst.store_row(i1, i2, i3, row) };
            }
        })
    });
    Ok(())
}
