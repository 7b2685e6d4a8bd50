//! What a worker says about the machine it runs on, read from Linux's
//! `/proc`: CPU model, cores, memory, host name. (GPUs come from NVML,
//! elsewhere.)

use crate::member::Hardware;

/// This machine as a worker registers it: its GPUs through NVML (none
/// without a driver) and its CPU and memory.
pub fn hardware() -> Hardware {
    Hardware {
        gpus: crate::gpu::gpus(),
        ..cpu_hardware()
    }
}

/// This machine's CPU and memory; `gpus` left empty.
pub fn cpu_hardware() -> Hardware {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    Hardware {
        gpus: Vec::new(),
        cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| std::env::consts::ARCH.to_owned()),
        cpu_cores: u32::try_from(cores).unwrap_or(u32::MAX),
        memory_bytes: memory_bytes(&meminfo).unwrap_or(0),
    }
}

/// The first `model name` in `/proc/cpuinfo`.
pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "model name")
            .then(|| value.trim().to_owned())
            .filter(|v| !v.is_empty())
    })
}

/// `MemTotal` in `/proc/meminfo`, in bytes.
pub fn memory_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut fields = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = fields.next()?.parse().ok()?;
    match fields.next() {
        Some("kB") | None => n.checked_mul(1024),
        Some(_) => None,
    }
}

/// The machine's host name (`/proc/sys/kernel/hostname`), else `worker`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_model_and_memory_from_proc_texts() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\nflags\t: fpu\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz\n";
        assert_eq!(
            cpu_model(cpuinfo).as_deref(),
            Some("Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz")
        );
        assert_eq!(cpu_model("processor\t: 0\n"), None);
        let meminfo = "MemTotal:       16303716 kB\nMemFree:         1000 kB\n";
        assert_eq!(memory_bytes(meminfo), Some(16_303_716 * 1024));
        assert_eq!(memory_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(memory_bytes("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn this_machine_reports_cores() {
        let hw = cpu_hardware();
        assert!(hw.cpu_cores >= 1);
        assert!(hw.gpus.is_empty());
    }
}
