//! `gantry rpc-server`: serve this machine's devices to remote clients over
//! QUIC with mutual TLS (feature `remote`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Most clients connected at once (1 to 65,536).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub max_clients: u32,
    /// A client silent for this long is gone (milliseconds, 100 to 2^62 − 1: QUIC's bound).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..(1 << 62)))]
    pub idle_timeout_ms: u64,
    /// A graph computing longer is stopped (between its nodes, or inside a long one) and answered with an error, so one
    /// client cannot hold a device: seconds (`60`, `1.5`) or with a unit (`500ms`, `90s`, `10m`).
    #[arg(long, default_value = "60", value_parser = parse_duration)]
    pub compute_timeout: Duration,
    /// Most memory every client together may hold in buffers on this server: bytes, or with K, M, G
    /// or T (`8G`). Default: what the served devices have.
    #[arg(long, value_parser = parse_memory)]
    pub max_memory: Option<u64>,
    /// Most memory every client's requests together may hold while they arrive (a request's message,
    /// a chunk of a write; each stream's first 4 KiB not counted): bytes, or with K, M, G or T.
    #[arg(long, default_value = "256M", value_parser = parse_memory)]
    pub max_stream_memory: u64,
    /// A TLS handshake taking longer is dropped (a client is counted against --max-clients only once
    /// its handshake is done): seconds, or with a unit.
    #[arg(long, default_value = "10", value_parser = parse_duration)]
    pub handshake_timeout: Duration,
    /// A request that does not arrive whole, or a chunk of a write or read that does not move, within
    /// this long ends its stream with an error: seconds, or with a unit.
    #[arg(long, default_value = "30", value_parser = parse_duration)]
    pub stream_timeout: Duration,
    /// A connection holding no buffer and running no request (before its hello, or after freeing
    /// everything) is closed after this long, giving its --max-clients slot back: seconds, or with
    /// a unit.
    #[arg(long, default_value = "60", value_parser = parse_duration)]
    pub unused_timeout: Duration,
}

/// Parses a duration: seconds (`60`, `1.5`), or a number with `ms`, `s`, `m`
/// or `h`. Zero and durations past a year are refused.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("{text:?}: unknown unit {other:?} (ms, s, m or h)")),
    };
    let value: f64 = number.parse().map_err(|_| format!("{text:?}: expected a number, e.g. 60 or 500ms"))?;
    let seconds = value * scale;
    // A year is far past any sensible deadline and well inside what `Duration` holds.
    if !(seconds > 0.0 && seconds <= 365.0 * 86_400.0) {
        return Err(format!("{text:?}: expected a duration above zero and at most a year"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses `--max-memory`: a size as `--budget` reads them (`8G`, `512M`, bytes).
fn parse_memory(text: &str) -> Result<u64, String> {
    // The message without the `model:` prefix of the loaders' error kind.
    super::budget::parse_size(text).map(|n| n as u64).map_err(|e| match e {
        Error::Model(message) => message,
        other => other.to_string(),
    })
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
    if list.split(',').all(|n| n.trim().is_empty()) {
        return Err(Error::Model("--devices names no device: a server of nothing serves no one".into()));
    }
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
        limits: Limits {
            compute_timeout: args.compute_timeout,
            max_memory: args.max_memory.unwrap_or(u64::MAX),
            max_stream_memory: usize::try_from(args.max_stream_memory).unwrap_or(usize::MAX),
            handshake_timeout: args.handshake_timeout,
            stream_timeout: args.stream_timeout,
            unused_timeout: args.unused_timeout,
            ..Limits::default()
        },
        name: format!("gantry rpc-server {}", env!("CARGO_PKG_VERSION")),
    };
    let config = ListenConfig {
        listen: args.listen,
        identity,
        times: TransportTimes { idle_timeout: Duration::from_millis(args.idle_timeout_ms.max(100)) },
        max_clients: args.max_clients as usize,
        worker_threads: 2,
    };
    let server = RunningServer::start(config, state)?;
    // The first line of output: scripts (and the tests) read the port from it.
    println!("gantry rpc-server listening on {} serving {}", server.local_addr(), names.join(", "));
    use std::io::Write;
    let _ = std::io::stdout().flush();
    Ok(server)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{parse_duration, parse_memory};

    #[test]
    fn durations_take_seconds_or_a_unit() {
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        for bad in ["0", "-1", "abc", "5 parsecs", "1e9", "NaN", ""] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn memory_takes_bytes_or_a_unit() {
        assert_eq!(parse_memory("8G"), Ok(8 << 30));
        assert_eq!(parse_memory("4096"), Ok(4096));
        assert!(parse_memory("lots").is_err());
    }
}
