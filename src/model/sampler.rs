//! Choosing the next token from logits, llama.cpp's sampler chain:
//! repetition penalty over the last tokens, then top-k, top-p, min-p,
//! temperature and a seeded draw (or the most likely token when the
//! temperature is 0).

use std::collections::VecDeque;

use gantry_engine::SplitMix64;

/// How the next token is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerParams {
    /// Softmax temperature; 0 picks the most likely token (greedy).
    pub temperature: f32,
    /// Sample among the `top_k` most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities add up to `top_p` (1 = all).
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` times the most likely one (0 = off).
    pub min_p: f32,
    /// Divide positive logits (multiply negative ones) of recently seen tokens by this (1 = off).
    pub repeat_penalty: f32,
    /// How many of the last tokens the penalty looks at.
    pub repeat_last_n: usize,
    /// Random seed.
    pub seed: u64,
}

impl Default for SamplerParams {
    /// llama.cpp's defaults, except greedy.
    fn default() -> Self {
        Self { temperature: 0.0, top_k: 40, top_p: 0.95, min_p: 0.05, repeat_penalty: 1.0, repeat_last_n: 64, seed: 42 }
    }
}

/// A seeded sampler; keeps the recent tokens and its scratch between calls.
pub struct Sampler {
    params: SamplerParams,
    rng: SplitMix64,
    recent: VecDeque<u32>,
    candidates: Vec<(f32, u32)>,
}

impl Sampler {
    /// A sampler with `params`.
    pub fn new(params: SamplerParams) -> Self {
        Self { params, rng: SplitMix64::new(params.seed), recent: VecDeque::new(), candidates: Vec::new() }
    }

    /// Records `token` as seen (prompt or generated), for the repetition penalty.
    pub fn accept(&mut self, token: u32) {
        if self.params.repeat_last_n == 0 {
            return;
        }
        if self.recent.len() == self.params.repeat_last_n {
            self.recent.pop_front();
        }
        self.recent.push_back(token);
    }

    /// Forgets the recent tokens (a new conversation).
    pub fn reset(&mut self) {
        self.recent.clear();
    }

    /// The next token for `logits` (one position's, `[n_vocab]`).
    ///
    /// ```
    /// use gantry::model::sampler::{Sampler, SamplerParams};
    /// let mut greedy = Sampler::new(SamplerParams { temperature: 0.0, ..Default::default() });
    /// assert_eq!(greedy.sample(&[0.1, 2.0, -1.0]), 1);
    /// ```
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let p = self.params;
        self.candidates.clear();
        self.candidates.extend(logits.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| (v, i as u32)));
        if self.candidates.is_empty() {
            return 0;
        }
        if p.repeat_penalty != 1.0 && p.repeat_penalty > 0.0 {
            for c in &mut self.candidates {
                if self.recent.contains(&c.1) {
                    c.0 = if c.0 > 0.0 { c.0 / p.repeat_penalty } else { c.0 * p.repeat_penalty };
                }
            }
        }
        let best = |c: &[(f32, u32)]| c.iter().fold((f32::NEG_INFINITY, 0), |b, &x| if x.0 > b.0 { x } else { b }).1;
        if p.temperature <= 0.0 || self.candidates.len() < 2 {
            return best(&self.candidates);
        }
        let k = if p.top_k == 0 { self.candidates.len() } else { p.top_k.min(self.candidates.len()) };
        if k < self.candidates.len() {
            self.candidates.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
            self.candidates.truncate(k);
        }
        self.candidates.sort_by(|a, b| b.0.total_cmp(&a.0));
        // top-p and min-p look at the probabilities before the temperature.
        let max = self.candidates[0].0;
        let weights: Vec<f64> = self.candidates.iter().map(|c| f64::from(c.0 - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        let mut keep = self.candidates.len();
        if p.top_p < 1.0 {
            let mut mass = 0.0;
            for (i, w) in weights.iter().enumerate() {
                mass += w / total;
                if mass >= f64::from(p.top_p) {
                    keep = keep.min(i + 1);
                    break;
                }
            }
        }
        if p.min_p > 0.0 {
            // The first weight is the largest, 1.
            let n = weights.iter().take_while(|&&w| w >= f64::from(p.min_p)).count().max(1);
            keep = keep.min(n);
        }
        self.candidates.truncate(keep);
        let mut total = 0.0f64;
        for c in &mut self.candidates {
            c.0 = ((c.0 - max) / p.temperature).exp();
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

    fn plain(temperature: f32, top_k: usize, seed: u64) -> SamplerParams {
        SamplerParams { temperature, top_k, top_p: 1.0, min_p: 0.0, seed, ..SamplerParams::default() }
    }

    fn histogram(s: &mut Sampler, logits: &[f32], n: usize) -> Vec<usize> {
        let mut seen = vec![0; logits.len()];
        for _ in 0..n {
            seen[s.sample(logits) as usize] += 1;
        }
        seen
    }

    #[test]
    fn top_k_one_is_greedy_and_temperature_spreads() {
        let logits = [1.0, 3.0, 2.0, -5.0];
        let mut s = Sampler::new(plain(1.0, 1, 1));
        assert!((0..50).all(|_| s.sample(&logits) == 1));
        let seen = histogram(&mut Sampler::new(plain(1.0, 0, 7)), &logits, 2000);
        // softmax([1, 3, 2, -5]) ~ [0.090, 0.665, 0.245, 0.0002]
        assert!(seen[1] > 1200 && seen[1] < 1450, "{seen:?}");
        assert!(seen[2] > 400 && seen[2] < 600, "{seen:?}");
        assert!(seen[3] < 5, "{seen:?}");
        let mut a = Sampler::new(plain(0.8, 3, 3));
        let mut b = Sampler::new(plain(0.8, 3, 3));
        assert!((0..20).all(|_| a.sample(&logits) == b.sample(&logits)), "same seed, same tokens");
    }

    #[test]
    fn top_p_and_min_p_cut_the_tail() {
        let logits = [1.0, 3.0, 2.0, -5.0];
        // p ~ [0.090, 0.665, 0.245, 0.0002]: top-p 0.8 keeps tokens 1 and 2.
        let seen = histogram(&mut Sampler::new(SamplerParams { top_p: 0.8, ..plain(1.0, 0, 5) }), &logits, 1000);
        assert!(seen[0] == 0 && seen[3] == 0 && seen[1] > 600 && seen[2] > 150, "{seen:?}");
        // min-p 0.2: token 0's 0.090 is below 0.2 * 0.665.
        let seen = histogram(&mut Sampler::new(SamplerParams { min_p: 0.2, ..plain(1.0, 0, 5) }), &logits, 1000);
        assert!(seen[0] == 0 && seen[3] == 0 && seen[2] > 150, "{seen:?}");
    }

    #[test]
    fn the_repeat_penalty_turns_greedy_away_from_seen_tokens() {
        let logits = [1.0, 3.0, 2.0, -5.0];
        let mut s = Sampler::new(SamplerParams { repeat_penalty: 2.0, ..plain(0.0, 0, 1) });
        assert_eq!(s.sample(&logits), 1);
        s.accept(1);
        assert_eq!(s.sample(&logits), 2, "3 / 2 = 1.5 < 2");
        s.accept(2);
        assert_eq!(s.sample(&logits), 1, "1.5 > 1.0");
        s.reset();
        assert_eq!(s.sample(&logits), 1);
        let mut window = Sampler::new(SamplerParams { repeat_penalty: 2.0, repeat_last_n: 1, ..plain(0.0, 0, 1) });
        window.accept(1);
        window.accept(0);
        assert_eq!(window.sample(&logits), 1, "only the last token is penalised");
    }
}
