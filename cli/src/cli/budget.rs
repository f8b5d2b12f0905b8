//! `--budget DEV=SIZE,...`: memory budgets per device, the layers fitted
//! under them, and the scheduler held to them.

use std::path::Path;
use std::sync::Arc;

use gantry::model::decoder::{
    DecoderHparams, DecoderModel, DeviceRoom, LayerCounts, ModelFootprint, Session, compute_estimate, fit_layers,
    fit_layers_experts_last,
};
use gantry::model::gguf::Gguf;
use gantry::model::{HostTensors, LoadProgress};
use gantry::{Backend, Context, DType, Device, DeviceType, Error, Result};

use super::common::bytes;

/// Parses a size: bytes, or a number with `K`, `M`, `G` or `T` (powers of
/// 1024; `KiB`, `MB`, ... are read the same way), e.g. `512M`, `1.5G`.
pub fn parse_size(text: &str) -> Result<usize> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(Error::Model(format!("size {text:?}: unknown unit {unit:?} (K, M, G or T)"))),
    };
    let value: f64 =
        number.parse().map_err(|_| Error::Model(format!("size {text:?}: expected a number, e.g. 2G or 512M")))?;
    let bytes = value * (1u64 << shift) as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > usize::MAX as f64 {
        return Err(Error::Model(format!("size {text:?} is out of range")));
    }
    Ok(bytes as usize)
}

/// The budget per backend (priority order) that `list` (`wgpu0=2G,cpu=4G`)
/// gives: each name is a device or backend name of `backends`
/// (case-insensitive); a name that is none of them is an error listing them,
/// and so is a device named twice (`cpu=1K,cpu=4G`).
pub fn budgets_for(list: &str, backends: &[Arc<dyn Backend>]) -> Result<Vec<Option<usize>>> {
    let mut out = vec![None; backends.len()];
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, size) = item
            .split_once('=')
            .ok_or_else(|| Error::Model(format!("--budget {item:?}: expected DEVICE=SIZE, e.g. cpu=4G")))?;
        let name = name.trim();
        let b = backends
            .iter()
            .position(|b| b.device().name().eq_ignore_ascii_case(name) || b.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                let known: Vec<&str> = backends.iter().map(|b| b.device().name()).collect();
                Error::Model(format!("--budget {name}: not one of the backends ({})", known.join(", ")))
            })?;
        if out[b].is_some() {
            return Err(Error::Model(format!(
                "--budget {name}: device {} has a budget already (one size per device)",
                backends[b].device().name()
            )));
        }
        out[b] = Some(parse_size(size)?);
    }
    Ok(out)
}

/// What the fit needs to know of the run besides the file.
#[derive(Debug, Clone, Copy)]
pub struct FitRequest {
    /// Cells of the KV cache.
    pub n_ctx: usize,
    /// Its element type.
    pub kv_dtype: DType,
    /// The largest batch (tokens per graph).
    pub n_batch: usize,
}

/// Loads the decoder in `path` with as many layers on each backend's device
/// as its budget allows (the GPUs in priority order, the rest on the CPU),
/// and says on stderr how the layers were spread. A mixture-of-experts
/// model's experts go to host memory before whole layers go to the CPU
/// ([`fit_layers_experts_last`]), unless `--n-cpu-moe` / `--cpu-moe` says
/// how many layers' experts stay there.
pub fn load_fitted(
    path: &Path,
    ctx: &mut Context,
    backends: &[Arc<dyn Backend>],
    budgets: &[Option<usize>],
    request: FitRequest,
    placement: super::common::WeightPlacement,
    progress: Option<&mut dyn FnMut(LoadProgress)>,
) -> Result<DecoderModel> {
    // Mapped even with `--no-mmap`: the fit reads the header only, and the
    // mapping is gone before the model is loaded (reading the whole file
    // here would read it twice).
    let gguf = Gguf::open(path)?;
    let hp = DecoderHparams::from_gguf(&gguf)?;
    let footprint = ModelFootprint::from_gguf(&gguf, &hp, request.n_ctx, request.kv_dtype)?;
    drop(gguf);
    // Every GPU in priority order, then the CPU (the scheduler's last backend).
    let chosen: Vec<usize> = (0..backends.len())
        .filter(|&b| backends[b].device().device_type() != DeviceType::Cpu || b + 1 == backends.len())
        .collect();
    let compute = compute_estimate(&hp, request.n_batch, request.n_ctx);
    let rooms: Vec<DeviceRoom> = chosen
        .iter()
        .map(|&b| DeviceRoom { name: backends[b].device().name().to_owned(), budget: budgets[b], compute })
        .collect();
    let (counts, n_cpu_moe) = if placement.host_tensors.is_none() {
        fit_layers_experts_last(&footprint, &rooms)?
    } else {
        let n = placement.host_tensors.experts_of_first_layers.min(hp.n_layer);
        (fit_layers(&footprint.with_experts_in_host_memory(n), &rooms)?, n)
    };
    let counts: LayerCounts = counts;
    let devices: Vec<&dyn Device> = chosen.iter().map(|&b| backends[b].device()).collect();
    let names: Vec<String> =
        rooms.iter().zip(counts.counts()).map(|(r, c)| format!("{} {c} ({})", r.name, budget_text(r.budget))).collect();
    let experts = match n_cpu_moe {
        0 => String::new(),
        n => format!("; the experts of the first {n} layers in host memory"),
    };
    eprintln!("fit: {} layers over {}{experts}", hp.n_layer, names.join(", "));
    let placement =
        super::common::WeightPlacement { host_tensors: HostTensors::experts_of_first_layers(n_cpu_moe), ..placement };
    DecoderModel::load_split_with(path, ctx, &devices, &counts, super::common::load_options(progress, placement))
}

/// Holds `session`'s scheduler to `budgets` and reserves its memory for a
/// batch of `n_batch` tokens: an error names the device a budget is too
/// small for, before anything is computed. Says on stderr what each device
/// holds.
pub fn reserve_within(
    session: &mut Session,
    ctx: &mut Context,
    backends: &[Arc<dyn Backend>],
    budgets: &[Option<usize>],
    n_batch: usize,
) -> Result<()> {
    for (b, budget) in backends.iter().zip(budgets) {
        session.set_budget(b, *budget)?;
    }
    let report = session.reserve(ctx, n_batch)?;
    for row in &report.backends {
        eprintln!(
            "memory: {}: compute {} + weights and cache {} = {} ({})",
            row.device,
            bytes(row.compute),
            bytes(row.held),
            bytes(row.total()),
            budget_text(row.budget)
        );
    }
    Ok(())
}

fn budget_text(budget: Option<usize>) -> String {
    budget.map_or_else(|| "no budget".to_owned(), |b| format!("budget {}", bytes(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("512K").unwrap(), 512 << 10);
        assert_eq!(parse_size("2M").unwrap(), 2 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1gb").unwrap(), 1 << 30);
        for bad in ["", "G", "2X", "-1G", "0", "1.2.3M"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_device_named_twice_is_refused_whichever_size_comes_last() {
        let cpu: Arc<dyn Backend> = Arc::new(gantry::backends::cpu::CpuBackend::new().unwrap());
        let backends = [cpu];
        assert_eq!(budgets_for("cpu=4G", &backends).unwrap(), [Some(4 << 30)]);
        for list in ["cpu=1K,cpu=4G", "cpu=4G,CPU=1K"] {
            let e = budgets_for(list, &backends).unwrap_err().to_string();
            assert!(e.contains("has a budget already"), "{list}: {e}");
        }
    }
}
