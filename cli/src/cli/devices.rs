//! `gantry devices`: the platforms and devices found, with their props.

use std::process::ExitCode;

use super::common::{bytes, registry};
use clap::Args;
use gantry::DeviceType;
use gantry::backends::cpu::{ISA_CAP_ENV, Isa, cpu_features, isa_cap};

/// Options of `gantry devices`.
#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Remote servers, `host:port,...` (default: `GANTRY_REMOTE`).
    #[arg(long)]
    pub remote: Option<String>,
}

/// Prints every platform and its devices.
pub fn run(args: &DevicesArgs) -> ExitCode {
    let cap = match isa_cap() {
        Ok(Some(cap)) => format!("capped by {ISA_CAP_ENV}={}; ", cap.name()),
        Ok(None) => String::new(),
        Err(e) => {
            eprintln!("gantry devices: {e}");
            return ExitCode::FAILURE;
        }
    };
    let registry = match registry(args.remote.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gantry devices: {e}");
            return ExitCode::FAILURE;
        }
    };
    for platform in registry.platforms() {
        println!("platform {}", platform.name());
        let mut any = false;
        for (id, device) in registry.devices() {
            if !registry.platform_of(id).is_ok_and(|p| p.name() == platform.name()) {
                continue;
            }
            any = true;
            let p = device.props();
            let mut caps = Vec::new();
            if p.caps.async_compute {
                caps.push("async");
            }
            if p.caps.host_buffer {
                caps.push("host buffer");
            }
            if p.caps.buffer_from_host_ptr {
                caps.push("buffer from host pointer");
            }
            if p.caps.events {
                caps.push("events");
            }
            let buft = device.buffer_type();
            println!("  {} ({}): {}", p.name, p.device_type.name(), p.description);
            println!("    memory: {} free of {}", bytes(p.memory.free), bytes(p.memory.total));
            println!(
                "    buffer type: {} (alignment {}, max buffer {})",
                buft.name(),
                buft.alignment(),
                if buft.max_size() == usize::MAX { "unlimited".into() } else { bytes(buft.max_size()) }
            );
            println!("    caps: {}", if caps.is_empty() { "none".into() } else { caps.join(", ") });
            if p.device_type == DeviceType::Cpu {
                let paths: Vec<&str> = Isa::available().map(Isa::name).collect();
                println!("    kernels: {} ({cap}this CPU runs: {})", Isa::best().name(), paths.join(", "));
                let features = cpu_features();
                println!("    features: {}", if features.is_empty() { "none".into() } else { features.join(" ") });
            }
        }
        if !any {
            match platform.unavailable_reason() {
                Some(why) => println!("  (no device found: {why})"),
                None => println!("  (no device found)"),
            }
        }
    }
    ExitCode::SUCCESS
}
