//! What `/metrics` reports, in Prometheus' text format: counters and gauges
//! the engine and the routes update with atomics (no lock on the hot path),
//! and two latency histograms.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histograms' buckets.
const BUCKETS: [f64; 14] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// A latency histogram with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations at or under each bound (not cumulative; summed when printed).
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    /// Sum of the observations in microseconds.
    sum_us: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| s <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(d.as_micros().min(u128::from(u64::MAX)) as u64, Ordering::Relaxed);
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, bucket) in BUCKETS.iter().zip(&self.buckets) {
            cumulative += bucket.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_us.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// The server's counters, gauges and histograms.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests answered, by outcome.
    pub requests_ok: AtomicU64,
    /// Requests answered with an error (any status ≥ 400, or an error event).
    pub requests_failed: AtomicU64,
    /// Requests whose client went away before the end.
    pub requests_cancelled: AtomicU64,
    /// Prompt tokens of admitted requests.
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens not computed because a slot's cells held them.
    pub prompt_tokens_reused: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Requests waiting for a slot.
    pub queue_length: AtomicU64,
    /// Slots running a request.
    pub slots_busy: AtomicU64,
    /// Slots in all.
    pub slots_total: AtomicU64,
    /// KV cells holding a token (running and reusable sequences).
    pub kv_cells_used: AtomicU64,
    /// KV cells in all.
    pub kv_cells_total: AtomicU64,
    /// Steps (batches) the engine ran.
    pub steps: AtomicU64,
    /// Embedding inputs computed.
    pub embedding_inputs: AtomicU64,
    /// From a request's arrival to its first generated token.
    pub time_to_first_token: Histogram,
    /// Between a sequence's consecutive tokens.
    pub inter_token_latency: Histogram,
}

impl Metrics {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Subtracts `n` from a gauge (never below 0).
    pub fn sub(gauge: &AtomicU64, n: u64) {
        let _ = gauge.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| Some(v.saturating_sub(n)));
    }

    /// One request fewer waits in the queue.
    pub fn sub_queue(metrics: &Metrics) {
        Self::sub(&metrics.queue_length, 1);
    }

    /// Sets a gauge.
    pub fn set(gauge: &AtomicU64, n: u64) {
        gauge.store(n, Ordering::Relaxed);
    }

    /// Everything, in Prometheus' text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |name: &str, kind: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}", v.load(Ordering::Relaxed));
        };
        line("gantry_requests_ok_total", "counter", "Requests answered successfully.", &self.requests_ok);
        line("gantry_requests_failed_total", "counter", "Requests answered with an error.", &self.requests_failed);
        line(
            "gantry_requests_cancelled_total",
            "counter",
            "Requests whose client disconnected first.",
            &self.requests_cancelled,
        );
        line("gantry_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.", &self.prompt_tokens);
        line(
            "gantry_prompt_tokens_reused_total",
            "counter",
            "Prompt tokens taken from cached cells instead of computed (prefix reuse hits).",
            &self.prompt_tokens_reused,
        );
        line("gantry_generated_tokens_total", "counter", "Tokens generated.", &self.generated_tokens);
        line("gantry_queue_length", "gauge", "Requests waiting for a slot.", &self.queue_length);
        line("gantry_slots_busy", "gauge", "Slots running a request.", &self.slots_busy);
        line("gantry_slots_total", "gauge", "Slots (--parallel).", &self.slots_total);
        line("gantry_kv_cells_used", "gauge", "KV cache cells holding a token.", &self.kv_cells_used);
        line("gantry_kv_cells_total", "gauge", "KV cache cells (--ctx-size).", &self.kv_cells_total);
        line("gantry_steps_total", "counter", "Batches the engine computed.", &self.steps);
        line("gantry_embedding_inputs_total", "counter", "Inputs embedded.", &self.embedding_inputs);
        self.time_to_first_token.write(
            &mut out,
            "gantry_time_to_first_token_seconds",
            "From a request's arrival to its first generated token.",
        );
        self.inter_token_latency.write(
            &mut out,
            "gantry_inter_token_latency_seconds",
            "Between consecutive tokens of one sequence.",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_counters_print() {
        let m = Metrics::default();
        m.time_to_first_token.observe(Duration::from_millis(3));
        m.time_to_first_token.observe(Duration::from_millis(300));
        m.time_to_first_token.observe(Duration::from_secs(500));
        Metrics::add(&m.generated_tokens, 7);
        let text = m.render();
        assert!(text.contains("gantry_generated_tokens_total 7"), "{text}");
        assert!(text.contains("gantry_time_to_first_token_seconds_bucket{le=\"0.005\"} 1"), "{text}");
        assert!(text.contains("gantry_time_to_first_token_seconds_bucket{le=\"0.5\"} 2"), "{text}");
        assert!(text.contains("gantry_time_to_first_token_seconds_bucket{le=\"120\"} 2"), "{text}");
        assert!(text.contains("gantry_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3"), "{text}");
        assert!(text.contains("gantry_time_to_first_token_seconds_count 3"), "{text}");
    }
}
