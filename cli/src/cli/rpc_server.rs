//! `gantry rpc-server`: serve this machine's devices to remote clients over
//! QUIC with mutual TLS (feature `remote`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use gantry::backends::local_registry;
use gantry::backends::remote::server::{ListenConfig, RunningServer, ServedDevice, ServerState, WeightCache};
use gantry::backends::remote::tls::{TlsFiles, TlsIdentity, TransportTimes};
use gantry::backends::remote::wire::Limits;
use gantry::model::Gguf;
use gantry::{Device, DeviceType, Error};

use super::common::bytes;

/// Options of `gantry rpc-server`.
#[derive(Args, Debug)]
pub struct RpcServerArgs {
    /// Address to listen on (`0.0.0.0:5000`; port 0 picks a free port, printed at start).
    #[arg(long)]
    pub listen: SocketAddr,
    /// Devices to serve: device or platform names, comma-separated.
    #[arg(long, default_value = "cpu")]
    pub devices: String,
    /// This server's certificate chain (PEM); it must name the host clients dial.
    #[arg(long)]
    pub cert: PathBuf,
    /// This server's private key (PEM).
    #[arg(long)]
    pub key: PathBuf,
    /// The authority client certificates must be signed by (PEM); clients without one are refused.
    #[arg(long)]
    pub client_ca: PathBuf,
    /// GGUF files, or directories of them, whose tensors clients bind by digest instead of sending (repeatable).
    #[arg(long)]
    pub weights: Vec<PathBuf>,
    /// Threads of the CPU backend (default: every core).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// Most clients connected at once.
    #[arg(long, default_value_t = 16)]
    pub max_clients: usize,
    /// A client silent for this long is gone (milliseconds).
    #[arg(long, default_value_t = 10_000)]
    pub idle_timeout_ms: u64,
}

/// Runs the server until the process is stopped.
pub fn run(args: &RpcServerArgs) -> ExitCode {
    match start(args) {
        Ok(server) => {
            server.wait();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gantry rpc-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The devices named by `list`, each with a backend.
fn served_devices(list: &str, threads: Option<usize>) -> gantry::Result<Vec<ServedDevice>> {
    // Probing for GPUs takes time (and prints driver noise) when only the CPU is served.
    let registry = if list.split(',').map(str::trim).filter(|n| !n.is_empty()).all(|n| n.eq_ignore_ascii_case("cpu")) {
        let mut r = gantry::Registry::new();
        r.register_platform(Arc::new(gantry::backends::cpu::CpuPlatform::new()))?;
        r
    } else {
        local_registry()?
    };
    let mut out: Vec<ServedDevice> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let ids: Vec<_> = match registry.find_device(name) {
            Some(id) => vec![id],
            None => registry
                .devices()
                .filter(|(id, _)| registry.platform_of(*id).is_ok_and(|p| p.name().eq_ignore_ascii_case(name)))
                .map(|(id, _)| id)
                .collect(),
        };
        if ids.is_empty() {
            let known: Vec<&str> = registry.devices().map(|(_, d)| d.name()).collect();
            return Err(Error::Model(format!(
                "--devices: no device or platform {name:?} (devices: {})",
                known.join(", ")
            )));
        }
        for id in ids {
            let device: Arc<dyn Device> = registry.device(id)?.clone();
            if out.iter().any(|d| d.device.name() == device.name()) {
                continue;
            }
            let params = match (device.device_type(), threads) {
                (DeviceType::Cpu, Some(n)) => Some(format!("threads={n}")),
                _ => None,
            };
            let backend = device.init_backend(params.as_deref())?;
            out.push(ServedDevice { device, backend });
        }
    }
    Ok(out)
}

/// Every tensor of the GGUF files at `paths` (files, or directories of `.gguf` files).
fn weight_cache(paths: &[PathBuf]) -> gantry::Result<WeightCache> {
    let mut cache = WeightCache::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for p in paths {
        if p.is_dir() {
            let entries = std::fs::read_dir(p)
                .map_err(|source| Error::Io { context: format!("reading {}", p.display()), source })?;
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x.eq_ignore_ascii_case("gguf")))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    for file in &files {
        index_gguf(&mut cache, file)?;
    }
    Ok(cache)
}

fn index_gguf(cache: &mut WeightCache, file: &Path) -> gantry::Result<()> {
    let started = Instant::now();
    let gguf = Gguf::open(file)?;
    let memory = gguf.host_memory();
    for info in gguf.tensors() {
        cache.insert(&memory, gguf.tensor_file_offset(info), info.size)?;
    }
    eprintln!(
        "weight cache: {} tensors ({}) of {} hashed in {:.0} ms",
        gguf.tensors().len(),
        bytes(gguf.tensor_bytes()),
        file.display(),
        started.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

fn start(args: &RpcServerArgs) -> gantry::Result<RunningServer> {
    let identity = TlsIdentity::from_files(&TlsFiles {
        authority: args.client_ca.clone(),
        cert: args.cert.clone(),
        key: args.key.clone(),
    })?;
    let devices = served_devices(&args.devices, args.threads)?;
    let weights = weight_cache(&args.weights)?;
    let names: Vec<String> =
        devices.iter().map(|d| format!("{} ({})", d.device.name(), d.device.description())).collect();
    let state = ServerState {
        devices,
        weights,
        limits: Limits::default(),
        name: format!("gantry rpc-server {}", env!("CARGO_PKG_VERSION")),
    };
    let config = ListenConfig {
        listen: args.listen,
        identity,
        times: TransportTimes { idle_timeout: std::time::Duration::from_millis(args.idle_timeout_ms.max(100)) },
        max_clients: args.max_clients,
        worker_threads: 2,
    };
    let server = RunningServer::start(config, state)?;
    // The first line of output: scripts (and the tests) read the port from it.
    println!("gantry rpc-server listening on {} serving {}", server.local_addr(), names.join(", "));
    use std::io::Write;
    let _ = std::io::stdout().flush();
    Ok(server)
}
