//! What the OS says about the CPU: its model name and the memory. Read from
//! `/proc` on Linux; other systems get a generic name and unknown (zero) memory.

use gantry_engine::MemoryInfo;

/// The CPU model name (`/proc/cpuinfo`'s `model name`), or a generic one.
pub fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| parse_model_name(&text))
        .unwrap_or_else(|| format!("{} CPU", std::env::consts::ARCH))
}

/// Free (available) and total memory from `/proc/meminfo`; zeros when unknown.
pub fn memory() -> MemoryInfo {
    std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| parse_meminfo(&text)).unwrap_or_default()
}

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
    fn this_machine_reports_something() {
        assert!(!cpu_model_name().is_empty());
        let m = memory();
        assert!(m.free <= m.total);
        if cfg!(target_os = "linux") {
            assert!(m.total > 0);
        }
    }
}
