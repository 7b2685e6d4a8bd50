//! Physical ceilings for benchmark figures: the most arithmetic and the
//! most memory reads this machine can do per second.
//!
//! A benchmark that reports more work per second than the silicon can do has
//! measured something else. Issue #41 found one: the LLM prompt figure was
//! 18,476 tok/s on two cores because the prefix cache served the prompt,
//! and the script printed "meets". The benchmarks now divide the least work
//! a figure needs (multiply-adds per prompt token, bytes read per decoded
//! token) by these ceilings and refuse a verdict above the result.
//!
//! Every estimate errs upward, so a real measurement never trips it:
//!
//! - **Arithmetic**: 8-bit integer multiply-adds, the fastest arithmetic
//!   llama.cpp's quantised kernels use. The fastest x86 cores issue two
//!   vector multiply-add instructions a cycle, each doing one 8-bit
//!   multiply-add per byte of the register, so a core does at most
//!   `2 × register bytes` a cycle at its highest clock; a core with AMX
//!   (whose kernels are chosen where the build fixed them, ADR 0004) at most
//!   [`AMX_MACS_PER_CYCLE`].
//! - **Clock**: the kernel's reported maximum (`cpufreq`); where a VM hides
//!   it, the current clock × [`UNKNOWN_BOOST`].
//! - **Memory**: measured, not estimated: the best of several passes reading
//!   a buffer of the working set's size with the same threads, so a working
//!   set that fits in a cache is read at that cache's speed. The measuring
//!   loop is plain portable code, and a tuned kernel (wider loads, software
//!   prefetch) reads a little faster, so a ceiling allows
//!   [`READ_HEADROOM`] times the measured rate ([`read_ceiling`]).

use std::time::Instant;

use super::{CpuInfo, Feature};

/// How much faster than [`read_bandwidth`]'s plain loop a tuned kernel may
/// read the same bytes. On a 2-core Zen 4 VM the BLAS-style matrix-vector
/// product of exact search read a 154 MB base at 1.03× the loop's best pass;
/// 1.5× leaves room for that and for a quieter moment than the measuring
/// one, and still catches what the bounds are for: figures many times too
/// high, from a cache or a shortcut.
pub const READ_HEADROOM: f64 = 1.5;
// More room than the plain loop, and not so much that a cache hit (10× or
// more) would pass.
const _: () = assert!(READ_HEADROOM > 1.0 && READ_HEADROOM < 10.0);

/// How far above the reported clock a core may run when the OS does not say
/// (VMs): a generous allowance, no x86 part boosts to twice its base clock
/// for all-core vector work.
pub const UNKNOWN_BOOST: f64 = 2.0;

/// The clock the ceilings assume, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Clock {
    pub ghz: f64,
    /// `cpufreq max`, or `cpuinfo × 2 (no max reported)`.
    pub source: String,
}

impl Clock {
    /// The highest clock of this machine, as far as the OS tells.
    pub fn detect() -> Self {
        let max_khz =
            std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|&k| k > 0.0);
        if let Some(khz) = max_khz {
            return Self {
                ghz: khz / 1e6,
                source: "cpufreq max".to_owned(),
            };
        }
        let mhz = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| cpuinfo_mhz(&text))
            // Unknown everywhere: 3 GHz, boosted like the rest.
            .unwrap_or(3000.0);
        Self {
            ghz: mhz / 1e3 * UNKNOWN_BOOST,
            source: format!(
                "cpuinfo {:.2} GHz × {UNKNOWN_BOOST} (no max reported)",
                mhz / 1e3
            ),
        }
    }
}

/// The highest `cpu MHz` line of `/proc/cpuinfo`.
fn cpuinfo_mhz(text: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with("cpu MHz"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .reduce(f64::max)
}

/// Bytes in the widest vector register the CPU (and OS) can use.
pub fn vector_bytes(cpu: &CpuInfo) -> usize {
    if cpu.has(Feature::Avx512) {
        64
    } else if cpu.has(Feature::Avx2) || cpu.has(Feature::Avx) {
        32
    } else {
        16
    }
}

/// 8-bit multiply-adds an AMX tile unit does a cycle: a `TDPBUSD` of a
/// 16 × 64 by 64 × 16 tile (16,384 of them) issues every 16 cycles
/// (Intel's optimization reference manual, "Intel AMX").
pub const AMX_MACS_PER_CYCLE: f64 = 1024.0;

/// The most arithmetic operations (a multiply-add counts as two) `threads`
/// cores can do per second: 8-bit multiply-adds on two vector units, or on
/// the AMX tile unit where the CPU has one.
pub fn peak_ops_per_s(cpu: &CpuInfo, threads: usize, clock: &Clock) -> f64 {
    let cores = threads.clamp(1, cpu.cores.max(1)) as f64;
    let macs_per_cycle = if cpu.has(Feature::AmxInt8) {
        AMX_MACS_PER_CYCLE
    } else {
        2.0 * vector_bytes(cpu) as f64
    };
    cores * clock.ghz * 1e9 * macs_per_cycle * 2.0
}

/// Bytes per second `threads` threads read from a buffer of `bytes` bytes
/// (the best of several passes, after one to fault the pages in). A buffer
/// that fits in a cache is read at that cache's speed, which is what a
/// working set of that size gets.
pub fn read_bandwidth(bytes: usize, threads: usize) -> f64 {
    let threads = threads.max(1);
    // Whole 64-byte lines per thread, at least one each.
    let words = (bytes / 8).max(8 * threads).next_multiple_of(8 * threads);
    let buffer: Vec<u64> = (0..words as u64).collect();
    let per_thread = words / threads;
    // The sum goes through `black_box` so the reads are not optimised away;
    // eight independent sums keep several loads in flight.
    let pass = |part: &[u64]| {
        let mut sums = [0u64; 8];
        for line in part.chunks_exact(8) {
            for (s, w) in sums.iter_mut().zip(line) {
                *s = s.wrapping_add(*w);
            }
        }
        std::hint::black_box(sums);
    };
    let mut best = f64::MAX;
    // Repeated passes over a small buffer, so each timing is at least ~5 ms.
    let repeats = (64 << 20) / (words * 8).max(1) + 1;
    for _ in 0..6 {
        let started = Instant::now();
        std::thread::scope(|scope| {
            for part in buffer.chunks(per_thread) {
                scope.spawn(move || {
                    for _ in 0..repeats {
                        pass(part);
                    }
                });
            }
        });
        best = best.min(started.elapsed().as_secs_f64());
    }
    (words * 8 * repeats) as f64 / best
}

/// The most bytes per second `threads` threads can read from a working set
/// of `bytes` bytes: [`read_bandwidth`] with [`READ_HEADROOM`].
pub fn read_ceiling(bytes: usize, threads: usize) -> f64 {
    read_bandwidth(bytes, threads) * READ_HEADROOM
}

/// How a figure stands against its ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plausible {
    /// At or under the ceiling.
    Yes,
    /// Above it: the benchmark measured something other than the work it
    /// names (a cache, a shortcut), and no verdict may be drawn from it.
    AboveBound,
}

/// Whether `figure` (work per second) is possible under `ceiling`.
pub fn check(figure: f64, ceiling: f64) -> Plausible {
    if figure <= ceiling {
        Plausible::Yes
    } else {
        Plausible::AboveBound
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(features: &[Feature], cores: usize) -> CpuInfo {
        CpuInfo {
            model: "test".to_owned(),
            cores,
            features: features.to_vec(),
        }
    }

    const CLOCK: Clock = Clock {
        ghz: 3.0,
        source: String::new(),
    };

    #[test]
    fn the_peak_follows_register_width_threads_and_clock() {
        let avx512 = cpu(&[Feature::Avx2, Feature::Avx512], 2);
        let avx2 = cpu(&[Feature::Avx, Feature::Avx2], 2);
        let sse = cpu(&[], 2);
        // 2 cores × 3 GHz × (2 units × 64 MACs) × 2 ops.
        assert_eq!(peak_ops_per_s(&avx512, 2, &CLOCK), 2.0 * 3e9 * 128.0 * 2.0);
        assert_eq!(
            peak_ops_per_s(&avx2, 2, &CLOCK),
            peak_ops_per_s(&avx512, 2, &CLOCK) / 2.0
        );
        assert_eq!(
            peak_ops_per_s(&sse, 2, &CLOCK),
            peak_ops_per_s(&avx2, 2, &CLOCK) / 2.0
        );
        // AMX's tile unit: 1,024 multiply-adds a cycle, 8× two AVX-512 units.
        let amx = cpu(&[Feature::Avx2, Feature::Avx512, Feature::AmxInt8], 2);
        assert_eq!(
            peak_ops_per_s(&amx, 2, &CLOCK),
            peak_ops_per_s(&avx512, 2, &CLOCK) * 8.0
        );
        // Threads beyond the cores do no more work; one thread does half.
        assert_eq!(
            peak_ops_per_s(&avx2, 8, &CLOCK),
            peak_ops_per_s(&avx2, 2, &CLOCK)
        );
        assert_eq!(
            peak_ops_per_s(&avx2, 1, &CLOCK),
            peak_ops_per_s(&avx2, 2, &CLOCK) / 2.0
        );
    }

    #[test]
    fn the_issue_41_prompt_figure_is_above_two_cores_ceiling() {
        // SmolLM2-135M: at least 2 × 78 M ops per prompt token (its weights
        // less the embedding and output tables); 2 AVX-512 cores at 3 GHz.
        let ceiling = peak_ops_per_s(&cpu(&[Feature::Avx512], 2), 2, &CLOCK) / (2.0 * 78e6);
        assert_eq!(check(18_476.0, ceiling), Plausible::AboveBound);
        assert_eq!(check(203.0, ceiling), Plausible::Yes);
        assert_eq!(check(ceiling, ceiling), Plausible::Yes);
    }

    #[test]
    fn the_clock_comes_from_the_fastest_core_listed() {
        let text = "processor\t: 0\ncpu MHz\t\t: 2596.122\nprocessor\t: 1\ncpu MHz\t\t: 3100.5\n";
        assert_eq!(cpuinfo_mhz(text), Some(3100.5));
        assert_eq!(cpuinfo_mhz("model name\t: x\n"), None);
        assert!(Clock::detect().ghz > 0.0);
    }

    #[test]
    fn reading_memory_takes_time_and_reports_a_finite_rate() {
        let rate = read_bandwidth(1 << 20, 2);
        assert!(rate.is_finite() && rate > 0.0, "{rate}");
        // A buffer smaller than a line per thread still reads something.
        assert!(read_bandwidth(3, 4) > 0.0);
        let ceiling = read_ceiling(1 << 20, 2);
        assert!(ceiling.is_finite() && ceiling > 0.0, "{ceiling}");
    }
}
