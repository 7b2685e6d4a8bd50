//! How many threads the matrix kernels should run on: one per physical core.
//!
//! Two hardware threads of one core share its vector units, so a second
//! thread per core adds no multiply-adds to llama.cpp's kernels; it adds a
//! thread to every barrier of the graph, and on a busy server it takes the
//! core from the other work. llama.cpp's own default is the physical core
//! count for this reason (`cpu_get_num_math`); ONNX Runtime's intra-op pool
//! defaults to physical cores too. A cloud vCPU is usually a hardware thread:
//! a 4-vCPU instance is 2 cores.
//!
//! Linux: the CPUs this process may run on (`Cpus_allowed_list` in
//! `/proc/self/status`), grouped by `(physical_package_id, core_id)` from
//! sysfs; never more than `available_parallelism` (which also counts cgroup
//! CPU quotas). Elsewhere, or when the files are missing: the logical count.

use std::collections::BTreeSet;
use std::path::Path;

/// Threads for the compute kernels: physical cores this process may use,
/// capped by [`std::thread::available_parallelism`]; at least 1.
pub fn compute_threads() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, usize::from);
    let physical = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| allowed_cpus(&status))
        .and_then(|cpus| physical_cores(Path::new("/sys/devices/system/cpu"), &cpus));
    physical.map_or(logical, |p| p.min(logical)).max(1)
}

/// The CPU numbers of the `Cpus_allowed_list:` line (`0-3,8,10-11`).
fn allowed_cpus(status: &str) -> Option<Vec<u32>> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    let mut cpus = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        let num = |t: &str| t.trim().parse::<u32>().ok();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if hi < lo || hi - lo > 1 << 16 {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// Distinct `(package, core)` pairs among `cpus` under a sysfs `cpu` folder;
/// `None` if any CPU's topology cannot be read.
fn physical_cores(sys_cpu: &Path, cpus: &[u32]) -> Option<usize> {
    let read = |cpu: u32, file: &str| -> Option<i64> {
        let path = sys_cpu.join(format!("cpu{cpu}/topology/{file}"));
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let mut cores = BTreeSet::new();
    for &cpu in cpus {
        cores.insert((read(cpu, "physical_package_id")?, read(cpu, "core_id")?));
    }
    Some(cores.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowed_list_reads_ranges_and_single_cpus() {
        let status = "Name:\tglassbox\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8,10-11\n";
        assert_eq!(allowed_cpus(status), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(allowed_cpus("Cpus_allowed_list:\t5\n"), Some(vec![5]));
        assert_eq!(allowed_cpus("Name:\tx\n"), None);
        assert_eq!(allowed_cpus("Cpus_allowed_list:\t3-1\n"), None);
        assert_eq!(allowed_cpus("Cpus_allowed_list:\tx\n"), None);
    }

    /// A sysfs `cpu` folder written for the test: `(cpu, package, core)`.
    fn sysfs(cpus: &[(u32, i64, i64)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (cpu, package, core) in cpus {
            let t = dir.path().join(format!("cpu{cpu}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), format!("{package}\n")).unwrap();
            std::fs::write(t.join("core_id"), format!("{core}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn hardware_threads_of_one_core_count_once() {
        // 4 vCPUs, two per core (the usual cloud instance).
        let dir = sysfs(&[(0, 0, 0), (1, 0, 1), (2, 0, 0), (3, 0, 1)]);
        assert_eq!(physical_cores(dir.path(), &[0, 1, 2, 3]), Some(2));
        // Pinned to one thread of each core.
        assert_eq!(physical_cores(dir.path(), &[0, 1]), Some(2));
        // Two sockets reuse core ids.
        let dir = sysfs(&[(0, 0, 0), (1, 1, 0)]);
        assert_eq!(physical_cores(dir.path(), &[0, 1]), Some(2));
        // A CPU without topology files: unknown, not a guess.
        assert_eq!(physical_cores(dir.path(), &[0, 1, 7]), None);
    }

    #[test]
    fn this_machine_gets_at_least_one_thread_and_no_more_than_it_may_use() {
        let n = compute_threads();
        let logical = std::thread::available_parallelism().map_or(1, usize::from);
        assert!((1..=logical).contains(&n), "{n} of {logical}");
    }
}
