//! Weights kept in host memory whatever device the rest of the model goes
//! to: llama.cpp's `--n-cpu-moe N` / `--cpu-moe`. A mixture-of-experts
//! layer's expert tensors are most of its bytes but each token reads only
//! the few experts it is routed to, so a model too large for a GPU runs
//! best with its attention on the GPU and some layers' experts computed by
//! the CPU, where they are read in place (and repacked for its kernels).

/// Which weight tensors stay in host memory.
///
/// ```
/// use gantry::model::HostTensors;
/// let first_two = HostTensors::experts_of_first_layers(2);
/// assert!(first_two.contains("blk.1.ffn_up_exps.weight"));
/// assert!(first_two.contains("blk.0.ffn_down_exps.bias"));
/// assert!(!first_two.contains("blk.2.ffn_gate_exps.weight"));
/// assert!(!first_two.contains("blk.0.ffn_gate_inp.weight"), "the router is no expert");
/// assert!(!HostTensors::NONE.contains("blk.0.ffn_up_exps.weight"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostTensors {
    /// The expert tensors (`blk.N.ffn_{gate,up,down,gate_up}_exps.*`, their
    /// biases included) of layers `0 .. experts_of_first_layers` stay in
    /// host memory (`usize::MAX`: every layer's).
    pub experts_of_first_layers: usize,
}

impl HostTensors {
    /// Every tensor goes where the device's share of the model goes.
    pub const NONE: Self = Self { experts_of_first_layers: 0 };

    /// The experts of the first `n` layers in host memory (`--n-cpu-moe N`).
    pub const fn experts_of_first_layers(n: usize) -> Self {
        Self { experts_of_first_layers: n }
    }

    /// Every layer's experts in host memory (`--cpu-moe`).
    pub const ALL_EXPERTS: Self = Self { experts_of_first_layers: usize::MAX };

    /// Whether nothing is kept in host memory.
    pub fn is_none(&self) -> bool {
        self.experts_of_first_layers == 0
    }

    /// Whether the tensor named `name` stays in host memory.
    pub fn contains(&self, name: &str) -> bool {
        expert_layer(name).is_some_and(|layer| layer < self.experts_of_first_layers)
    }
}

/// The layer of an expert tensor's name (`blk.7.ffn_up_exps.weight` → 7),
/// `None` for any other tensor. The names are llama.cpp's (its `--n-cpu-moe`
/// matches `blk\.(\d+)\.ffn_(up|down|gate|gate_up)_(ch|)exps`).
fn expert_layer(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("blk.")?;
    let (layer, rest) = rest.split_once('.')?;
    let (tensor, _suffix) = rest.split_once('.')?;
    let part = tensor.strip_prefix("ffn_")?;
    let part = part.strip_suffix("_exps").or_else(|| part.strip_suffix("_chexps"))?;
    matches!(part, "up" | "down" | "gate" | "gate_up").then(|| layer.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_expert_tensors_of_the_first_layers_are_kept() {
        assert_eq!(expert_layer("blk.12.ffn_gate_up_exps.weight"), Some(12));
        assert_eq!(expert_layer("blk.3.ffn_up_chexps.weight"), Some(3));
        for other in [
            "blk.0.ffn_up.weight",
            "blk.0.ffn_up_shexp.weight",
            "blk.0.ffn_gate_inp.weight",
            "blk.x.ffn_up_exps.weight",
            "token_embd.weight",
            "blk.0.ffn_norm_exps",
            "blk.0.attn_q.weight",
        ] {
            assert_eq!(expert_layer(other), None, "{other}");
        }
        let all = HostTensors::ALL_EXPERTS;
        assert!(all.contains("blk.999.ffn_down_exps.weight") && !all.is_none());
        assert!(HostTensors::default().is_none());
    }
}
