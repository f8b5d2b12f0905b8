//! What the OS says about the CPU: its model name and the memory. Linux:
//! `/proc`; macOS: `sysctl machdep.cpu.brand_string` (Apple silicon has no
//! brand string: `hw.model` then); Windows: the registry's
//! `ProcessorNameString` (through `reg query`, so no FFI). Memory is read
//! on Linux only; elsewhere it is unknown (zero). Anything missing gives a
//! generic name, never an error.

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
    fn this_machine_reports_something() {
        assert!(!cpu_model_name().is_empty());
        let m = memory();
        assert!(m.free <= m.total);
        if cfg!(target_os = "linux") {
            assert!(m.total > 0);
        }
    }
}
