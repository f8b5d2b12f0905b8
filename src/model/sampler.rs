//! Choosing the next token from logits: greedy, or temperature with top-k.

use gantry_engine::SplitMix64;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerParams {
    /// Softmax temperature; 0 picks the most likely token (greedy).
    pub temperature: f32,
    /// Sample among the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Random seed.
    pub seed: u64,
}

impl Default for SamplerParams {
    fn default() -> Self {
        Self { temperature: 0.0, top_k: 40, seed: 42 }
    }
}

/// A seeded sampler; keeps its scratch between calls.
pub struct Sampler {
    params: SamplerParams,
    rng: SplitMix64,
    candidates: Vec<(f32, u32)>,
}

impl Sampler {
    /// A sampler with `params`.
    pub fn new(params: SamplerParams) -> Self {
        Self { params, rng: SplitMix64::new(params.seed), candidates: Vec::new() }
    }

    /// The next token for `logits` (one position's, `[n_vocab]`).
    ///
    /// ```
    /// use gantry::model::sampler::{Sampler, SamplerParams};
    /// let mut greedy = Sampler::new(SamplerParams { temperature: 0.0, ..Default::default() });
    /// assert_eq!(greedy.sample(&[0.1, 2.0, -1.0]), 1);
    /// ```
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let argmax = || {
            logits.iter().enumerate().fold(
                (0u32, f32::NEG_INFINITY),
                |best, (i, &v)| {
                    if v > best.1 { (i as u32, v) } else { best }
                },
            )
        };
        if self.params.temperature <= 0.0 || logits.len() < 2 {
            return argmax().0;
        }
        self.candidates.clear();
        self.candidates.extend(logits.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)));
        if self.candidates.is_empty() {
            return argmax().0;
        }
        let k =
            if self.params.top_k == 0 { self.candidates.len() } else { self.params.top_k.min(self.candidates.len()) };
        if k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
            self.candidates.truncate(k);
        }
        let max = self.candidates.iter().map(|c| c.0).fold(f32::NEG_INFINITY, f32::max);
        let mut total = 0.0f64;
        for c in &mut self.candidates {
            c.0 = ((c.0 - max) / self.params.temperature).exp();
            total += f64::from(c.0);
        }
        let mut pick = f64::from(self.rng.uniform() * 0.5 + 0.5) * total;
        for c in &self.candidates {
            pick -= f64::from(c.0);
            if pick <= 0.0 {
                return c.1;
            }
        }
        self.candidates.last().map_or(0, |c| c.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_one_is_greedy_and_temperature_spreads() {
        let logits = [1.0, 3.0, 2.0, -5.0];
        let mut s = Sampler::new(SamplerParams { temperature: 1.0, top_k: 1, seed: 1 });
        assert!((0..50).all(|_| s.sample(&logits) == 1));
        let mut s = Sampler::new(SamplerParams { temperature: 1.0, top_k: 0, seed: 7 });
        let mut seen = [0; 4];
        for _ in 0..2000 {
            seen[s.sample(&logits) as usize] += 1;
        }
        // softmax([1, 3, 2, -5]) ~ [0.090, 0.665, 0.245, 0.0002]
        assert!(seen[1] > 1200 && seen[1] < 1450, "{seen:?}");
        assert!(seen[2] > 400 && seen[2] < 600, "{seen:?}");
        assert!(seen[3] < 5, "{seen:?}");
        let mut a = Sampler::new(SamplerParams { temperature: 0.8, top_k: 3, seed: 3 });
        let mut b = Sampler::new(SamplerParams { temperature: 0.8, top_k: 3, seed: 3 });
        assert!((0..20).all(|_| a.sample(&logits) == b.sample(&logits)), "same seed, same tokens");
    }
}
