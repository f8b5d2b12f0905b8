//! What the OS says about the CPU: its model name, its data caches and the
//! memory. Linux: `/proc` and `/sys`; macOS: `sysctl machdep.cpu.brand_string`
//! (Apple silicon has no brand string: `hw.model` then); Windows: the
//! registry's `ProcessorNameString` (through `reg query`, so no FFI). Memory
//! and caches are read on Linux only; elsewhere memory is unknown (zero) and
//! the caches are typical ones. Anything missing gives a generic name or
//! size, never an error.

use gantry_engine::MemoryInfo;

/// The CPU model name from the OS, or a generic one.
pub fn cpu_model_name() -> String {
    os_model_name().unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

#[cfg(target_os = "linux")]
fn os_model_name() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| parse_model_name(&text))
}

#[cfg(target_os = "macos")]
fn os_model_name() -> Option<String> {
    ["machdep.cpu.brand_string", "hw.model"].iter().find_map(|key| {
        let out = std::process::Command::new("/usr/sbin/sysctl").args(["-n", key]).output().ok()?;
        out.status.success().then(|| parse_sysctl(&String::from_utf8_lossy(&out.stdout))).flatten()
    })
}

#[cfg(windows)]
fn os_model_name() -> Option<String> {
    let out = std::process::Command::new("reg")
        .args(["query", r"HKLM\HARDWARE\DESCRIPTION\System\CentralProcessor\0", "/v", "ProcessorNameString"])
        .output()
        .ok()?;
    out.status.success().then(|| parse_reg_query(&String::from_utf8_lossy(&out.stdout))).flatten()
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
fn os_model_name() -> Option<String> {
    None
}

/// `sysctl -n`'s answer: one line.
#[cfg_attr(not(any(test, target_os = "macos")), expect(dead_code, reason = "read on macOS; tested everywhere"))]
fn parse_sysctl(out: &str) -> Option<String> {
    let v = out.trim();
    (!v.is_empty()).then(|| v.to_owned())
}

/// `reg query ... /v ProcessorNameString`'s answer: the line
/// `    ProcessorNameString    REG_SZ    Intel(R) Xeon(R) ...`.
#[cfg_attr(not(any(test, windows)), expect(dead_code, reason = "read on Windows; tested everywhere"))]
fn parse_reg_query(out: &str) -> Option<String> {
    out.lines().find_map(|line| {
        let (_, rest) = line.trim().split_once("ProcessorNameString")?;
        let value = rest.trim().strip_prefix("REG_SZ")?.trim();
        (!value.is_empty()).then(|| value.to_owned())
    })
}

/// The data caches one core sees, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSizes {
    /// Level 1 data cache.
    pub l1d: usize,
    /// Level 2 cache.
    pub l2: usize,
    /// Level 3 cache (shared by several cores), 0 when there is none.
    pub l3: usize,
}

impl CacheSizes {
    /// What most x86-64 and ARM cores of the last years have at least: the
    /// sizes used where the OS does not say.
    pub const TYPICAL: CacheSizes = CacheSizes { l1d: 32 << 10, l2: 1 << 20, l3: 8 << 20 };
}

/// The data caches of the first CPU from `/sys/devices/system/cpu/cpu0/cache`
/// (Linux), [`CacheSizes::TYPICAL`] for what it does not say.
pub fn cache_sizes() -> CacheSizes {
    let mut sizes = CacheSizes::TYPICAL;
    #[cfg(target_os = "linux")]
    for index in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
        let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else { break };
        if let Some(bytes) = parse_cache_size(&size) {
            match (level.trim(), kind.trim()) {
                ("1", "Data" | "Unified") => sizes.l1d = bytes,
                ("2", "Data" | "Unified") => sizes.l2 = bytes,
                ("3", "Data" | "Unified") => sizes.l3 = bytes,
                _ => {}
            }
        }
    }
    sizes
}

/// A size as sysfs writes it: `32K`, `1024K`, `32M`.
#[cfg_attr(not(any(test, target_os = "linux")), expect(dead_code, reason = "read on Linux; tested everywhere"))]
fn parse_cache_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    digits.parse::<usize>().ok()?.checked_mul(scale).filter(|&b| b > 0)
}

/// Free (available) and total memory from `/proc/meminfo`; zeros when unknown.
pub fn memory() -> MemoryInfo {
    std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| parse_meminfo(&text)).unwrap_or_default()
}

#[cfg_attr(not(any(test, target_os = "linux")), expect(dead_code, reason = "read on Linux; tested everywhere"))]
fn parse_model_name(cpuinfo: &str) -> Option<String> {
    // x86 says "model name"; some ARM kernels only "Hardware" or "Processor".
    ["model name", "Hardware", "Processor", "cpu model"].iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            let v = v.trim();
            (k.trim() == *key && !v.is_empty()).then(|| v.to_owned())
        })
    })
}

fn parse_meminfo(meminfo: &str) -> Option<MemoryInfo> {
    let field = |name: &str| -> Option<usize> {
        meminfo.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let kib: usize = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            kib.checked_mul(1024)
        })
    };
    let total = field("MemTotal")?;
    let free = field("MemAvailable").or_else(|| field("MemFree")).unwrap_or(0);
    Some(MemoryInfo { free, total })
}

/// The most threads a CPU backend starts: four per hardware thread this
/// process may run on (oversubscribing a little is a host's choice; a count
/// from a typo or an unchecked input is not), and never fewer than 64.
pub fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).saturating_mul(4).max(64)
}

/// Checks a thread count asked of a CPU backend before anything is sized by
/// it: at least one, at most [`max_threads`]; the error names both.
pub fn check_thread_count(n_threads: usize) -> gantry_engine::Result<()> {
    let max = max_threads();
    if n_threads == 0 || n_threads > max {
        return Err(gantry_engine::Error::Unsupported(format!(
            "a CPU backend with {n_threads} threads: it takes 1 to {max} on this machine ({} hardware threads)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu\n";
        assert_eq!(parse_model_name(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(parse_model_name("processor : 0\n"), None);
        let meminfo = "MemTotal:       24000000 kB\nMemFree:         1000 kB\nMemAvailable:   12000000 kB\n";
        let m = parse_meminfo(meminfo).unwrap();
        assert_eq!((m.total, m.free), (24_000_000 * 1024, 12_000_000 * 1024));
        assert_eq!(parse_meminfo("garbage"), None);
    }

    #[test]
    fn parses_sysctl_and_the_registry() {
        assert_eq!(parse_sysctl("Apple M2 Pro\n").as_deref(), Some("Apple M2 Pro"));
        assert_eq!(parse_sysctl("\n"), None);
        let reg = "\r\nHKEY_LOCAL_MACHINE\\HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0\r\n    \
                   ProcessorNameString    REG_SZ    Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz\r\n\r\n";
        assert_eq!(parse_reg_query(reg).as_deref(), Some("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"));
        assert_eq!(parse_reg_query("ERROR: The system was unable to find the specified registry key"), None);
    }

    #[test]
    fn parses_cache_sizes() {
        assert_eq!(parse_cache_size("32K\n"), Some(32 << 10));
        assert_eq!(parse_cache_size("1024K"), Some(1 << 20));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("0K"), None);
        assert_eq!(parse_cache_size("lots"), None);
        let c = cache_sizes();
        assert!(c.l1d > 0 && c.l2 >= c.l1d);
    }

    #[test]
    fn this_machine_reports_something() {
        assert!(!cpu_model_name().is_empty());
        let m = memory();
        assert!(m.free <= m.total);
        if cfg!(target_os = "linux") {
            assert!(m.total > 0);
        }
    }
}
