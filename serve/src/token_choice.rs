//! Choosing a request's next token: OpenAI's presence and frequency
//! penalties over the tokens generated so far, then Gantry's sampler chain
//! (llama.cpp's repeat penalty, top-k, top-p, min-p, temperature, seed); and
//! the log-probabilities a request asks for, of the model's distribution.

use std::collections::HashMap;

use gantry::model::grammar::Constraint;
use gantry::model::sampler::{Sampler, SamplerParams};

/// How one request's tokens are chosen and when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationParams {
    /// The sampler chain's settings (temperature 0 is greedy).
    pub sampler: SamplerParams,
    /// Subtracted once from the logit of every token generated at least once.
    pub presence_penalty: f32,
    /// Subtracted from a token's logit once per time it was generated.
    pub frequency_penalty: f32,
    /// Log-probabilities of each chosen token and this many alternatives (`None`: none).
    pub logprobs: Option<usize>,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Strings that end the generation (not included in the text).
    pub stop: Vec<String>,
    /// Never choose an end-of-generation token (llama-server's `ignore_eos`, for
    /// benchmarks that want every reply `max_tokens` long).
    pub ignore_eos: bool,
}

/// A token's log-probability and the most likely alternatives at its position.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprobs {
    /// The chosen token.
    pub token: u32,
    /// Its log-probability under the model.
    pub logprob: f32,
    /// The most likely tokens with theirs, most likely first.
    pub top: Vec<(u32, f32)>,
}

/// A request's sampler with its penalty counts and scratch.
pub struct TokenChooser {
    sampler: Sampler,
    presence: f32,
    frequency: f32,
    /// How often each generated token appeared.
    counts: HashMap<u32, u32>,
    /// Tokens never chosen (end-of-generation tokens with `ignore_eos`).
    banned: Vec<u32>,
    /// The logits after the penalties.
    penalised: Vec<f32>,
}

impl TokenChooser {
    /// A chooser for `params`; `prompt` feeds the repeat penalty's window, as
    /// llama.cpp's sampler sees the prompt; `eog` are the end-of-generation
    /// tokens `ignore_eos` bans.
    pub fn new(params: &GenerationParams, prompt: &[u32], eog: &[u32]) -> Self {
        let mut sampler = Sampler::new(params.sampler);
        for &t in prompt {
            sampler.accept(t);
        }
        Self {
            sampler,
            presence: params.presence_penalty,
            frequency: params.frequency_penalty,
            counts: HashMap::new(),
            banned: if params.ignore_eos { eog.to_vec() } else { Vec::new() },
            penalised: Vec::new(),
        }
    }

    /// The next token for `logits` (one position's), among those
    /// `constraint` allows when there is one (an error when its grammar fails).
    pub fn choose(&mut self, logits: &[f32], constraint: Option<&mut Constraint>) -> gantry::Result<u32> {
        let penalise = !self.counts.is_empty() && (self.presence != 0.0 || self.frequency != 0.0);
        if !penalise && self.banned.is_empty() && constraint.is_none() {
            return Ok(self.sampler.sample(logits));
        }
        self.penalised.clear();
        self.penalised.extend_from_slice(logits);
        if penalise {
            for (&token, &n) in &self.counts {
                if let Some(l) = self.penalised.get_mut(token as usize) {
                    *l -= self.presence + self.frequency * n as f32;
                }
            }
        }
        for &t in &self.banned {
            if let Some(l) = self.penalised.get_mut(t as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
        if let Some(c) = constraint {
            c.mask(&mut self.penalised)?;
        }
        Ok(self.sampler.sample(&self.penalised))
    }

    /// Records a generated token.
    pub fn accept(&mut self, token: u32) {
        self.sampler.accept(token);
        *self.counts.entry(token).or_insert(0) += 1;
    }
}

/// `token`'s log-probability in `logits`' softmax and the `top` most likely
/// tokens with theirs.
pub fn logprobs(logits: &[f32], token: u32, top: usize) -> TokenLogprobs {
    let max = logits.iter().copied().filter(|v| v.is_finite()).fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().filter(|v| v.is_finite()).map(|&v| f64::from(v - max).exp()).sum();
    let log_z = f64::from(max) + sum.ln();
    let lp = |v: f32| if v.is_finite() { (f64::from(v) - log_z) as f32 } else { f32::NEG_INFINITY };
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &v) in logits.iter().enumerate() {
            if best.len() == top && best.last().is_some_and(|&(_, b)| v <= b) {
                continue;
            }
            let at = best.partition_point(|&(_, b)| b >= v);
            best.insert(at, (i as u32, v));
            best.truncate(top);
        }
    }
    TokenLogprobs {
        token,
        logprob: logits.get(token as usize).map_or(f32::NEG_INFINITY, |&v| lp(v)),
        top: best.into_iter().map(|(t, v)| (t, lp(v))).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greedy(presence: f32, frequency: f32) -> GenerationParams {
        GenerationParams {
            sampler: SamplerParams { temperature: 0.0, ..SamplerParams::default() },
            presence_penalty: presence,
            frequency_penalty: frequency,
            logprobs: None,
            max_tokens: 8,
            stop: Vec::new(),
            ignore_eos: false,
        }
    }

    #[test]
    fn penalties_lower_generated_tokens() {
        let logits = [1.0, 0.9, 0.0];
        let mut plain = TokenChooser::new(&greedy(0.0, 0.0), &[], &[]);
        plain.accept(0);
        assert_eq!(plain.choose(&logits, None).expect("no grammar"), 0);
        let mut presence = TokenChooser::new(&greedy(0.2, 0.0), &[], &[]);
        presence.accept(0);
        assert_eq!(presence.choose(&logits, None).expect("no grammar"), 1);
        // Frequency: 0.05 per time; twice is enough, once is not.
        let mut frequency = TokenChooser::new(&greedy(0.0, 0.06), &[], &[]);
        frequency.accept(0);
        assert_eq!(frequency.choose(&logits, None).expect("no grammar"), 0);
        frequency.accept(0);
        assert_eq!(frequency.choose(&logits, None).expect("no grammar"), 1);
    }

    #[test]
    fn ignore_eos_never_chooses_an_end_token() {
        let params = GenerationParams { ignore_eos: true, ..greedy(0.0, 0.0) };
        assert_eq!(TokenChooser::new(&params, &[], &[0]).choose(&[5.0, 1.0, 0.0], None).expect("no grammar"), 1);
        assert_eq!(
            TokenChooser::new(&greedy(0.0, 0.0), &[], &[0]).choose(&[5.0, 1.0, 0.0], None).expect("no grammar"),
            0
        );
    }

    #[test]
    fn logprobs_are_the_log_softmax_and_the_top_is_ordered() {
        let logits = [0.0f32, 2.0, 1.0, f32::NEG_INFINITY];
        let z: f64 = [0.0f64, 2.0, 1.0].iter().map(|v| v.exp()).sum();
        let r = logprobs(&logits, 2, 2);
        assert!((r.logprob as f64 - (1.0 - z.ln())).abs() < 1e-6);
        assert_eq!(r.top.iter().map(|t| t.0).collect::<Vec<_>>(), [1, 2]);
        assert!((r.top[0].1 as f64 - (2.0 - z.ln())).abs() < 1e-6);
        assert_eq!(logprobs(&logits, 3, 0).logprob, f32::NEG_INFINITY);
        assert!(logprobs(&logits, 0, 0).top.is_empty());
    }
}
