//! The GPUs of this machine, through NVIDIA's management library (NVML):
//! what they are ([`Gpu`], for a worker's [`Hardware`](crate::Hardware))
//! and how they are doing now ([`GpuStats`]: utilisation, memory,
//! temperature, power), read every few seconds by whoever monitors them
//! (the server's GPU monitor, `glassbox worker`).
//!
//! Readings come from a [`GpuSource`]; [`NvmlSource`] is the real one.
//! NVML is loaded at run time (`libnvidia-ml.so.1`, through `nvml-wrapper`,
//! ADR 0008), never linked: the project builds, and every binary runs, on a
//! machine with no GPU and no driver. There, NVML is simply *unavailable*:
//! no GPUs, no readings, one line on stderr the first time the process
//! asks ([`shared`]); never an error or a panic.
//!
//! A reading a device does not support (power on some boards, temperature
//! under MIG) is `None` rather than a failed sample, so one missing sensor
//! never hides the others.

use std::ffi::OsStr;
use std::io::Write;
use std::sync::OnceLock;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use serde::{Deserialize, Serialize};

use crate::member::Gpu;

/// The library NVML is loaded from unless told otherwise (the name the
/// driver installs; the NVIDIA container toolkit mounts it into containers).
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// One GPU's readings at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuStats {
    /// NVML's device index (0, 1, ...), stable while the machine runs.
    pub index: u32,
    /// The model, as NVML names it (`NVIDIA H200`).
    pub name: String,
    /// Share of the last sample period in which a kernel ran, 0–1.
    pub utilization: Option<f64>,
    pub memory_used_bytes: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    /// The GPU die, in °C.
    pub temperature_celsius: Option<f64>,
    /// Power drawn now, in watts.
    pub power_watts: Option<f64>,
    /// The power cap the driver enforces, in watts.
    pub power_limit_watts: Option<f64>,
}

impl GpuStats {
    /// Memory used over memory installed, 0–1, when both are known.
    pub fn memory_ratio(&self) -> Option<f64> {
        match (self.memory_used_bytes, self.memory_total_bytes) {
            (Some(used), Some(total)) if total > 0 => Some(used as f64 / total as f64),
            _ => None,
        }
    }
}

/// Where GPU readings come from: NVML on a real machine ([`NvmlSource`]).
pub trait GpuSource: Send + Sync {
    /// The GPUs present, for the worker's registration.
    fn gpus(&self) -> Vec<Gpu>;
    /// Reads every GPU now. Empty when there are none (or NVML is absent).
    fn sample(&self) -> Vec<GpuStats>;
    /// Why there are no readings at all (NVML could not be loaded), if so.
    fn unavailable(&self) -> Option<&str> {
        None
    }
}

/// A shared source (e.g. [`shared`]'s `&'static` one) is a source too.
impl<T: GpuSource + ?Sized> GpuSource for &T {
    fn gpus(&self) -> Vec<Gpu> {
        (**self).gpus()
    }

    fn sample(&self) -> Vec<GpuStats> {
        (**self).sample()
    }

    fn unavailable(&self) -> Option<&str> {
        (**self).unavailable()
    }
}

/// GPU readings through NVML, or nothing when NVML cannot be loaded.
pub struct NvmlSource {
    nvml: Result<Nvml, String>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource")
            .field("unavailable", &self.nvml.as_ref().err())
            .finish_non_exhaustive()
    }
}

impl NvmlSource {
    /// Loads NVML from [`NVML_LIBRARY`]. Prefer [`shared`], which does it
    /// once per process.
    pub fn open() -> NvmlSource {
        NvmlSource::open_library(OsStr::new(NVML_LIBRARY))
    }

    /// Loads NVML from the given library path or name.
    pub fn open_library(library: &OsStr) -> NvmlSource {
        let nvml = Nvml::builder().lib_path(library).init().map_err(|e| {
            format!(
                "NVML could not be loaded from `{}`: {e}",
                library.to_string_lossy()
            )
        });
        NvmlSource { nvml }
    }

    fn devices(&self) -> Vec<(u32, nvml_wrapper::Device<'_>)> {
        let Ok(nvml) = &self.nvml else {
            return Vec::new();
        };
        let count = nvml.device_count().unwrap_or(0);
        (0..count)
            .filter_map(|i| nvml.device_by_index(i).ok().map(|d| (i, d)))
            .collect()
    }
}

fn watts(milliwatts: u32) -> f64 {
    f64::from(milliwatts) / 1000.0
}

impl GpuSource for NvmlSource {
    fn gpus(&self) -> Vec<Gpu> {
        self.devices()
            .into_iter()
            .map(|(i, d)| Gpu {
                name: d.name().unwrap_or_else(|_| format!("GPU {i}")),
                memory_bytes: d.memory_info().map_or(0, |m| m.total),
                compute_capability: d
                    .cuda_compute_capability()
                    .ok()
                    .map(|c| format!("{}.{}", c.major, c.minor)),
            })
            .collect()
    }

    fn sample(&self) -> Vec<GpuStats> {
        self.devices()
            .into_iter()
            .map(|(index, d)| {
                let memory = d.memory_info().ok();
                GpuStats {
                    index,
                    name: d.name().unwrap_or_else(|_| format!("GPU {index}")),
                    utilization: d
                        .utilization_rates()
                        .ok()
                        .map(|u| f64::from(u.gpu.min(100)) / 100.0),
                    memory_used_bytes: memory.as_ref().map(|m| m.used),
                    memory_total_bytes: memory.as_ref().map(|m| m.total),
                    temperature_celsius: d.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
                    power_watts: d.power_usage().ok().map(watts),
                    power_limit_watts: d.enforced_power_limit().ok().map(watts),
                }
            })
            .collect()
    }

    fn unavailable(&self) -> Option<&str> {
        self.nvml.as_ref().err().map(String::as_str)
    }
}

/// This process's NVML, loaded on first use. When it cannot be loaded,
/// that is said once on stderr and every later call answers "no GPUs".
pub fn shared() -> &'static NvmlSource {
    static SHARED: OnceLock<NvmlSource> = OnceLock::new();
    SHARED.get_or_init(|| {
        let source = NvmlSource::open();
        if let Some(why) = source.unavailable() {
            // Not `eprintln!`: a closed stderr must not panic the server
            // that asked (glassbox_app::console says why).
            let mut err = std::io::stderr().lock();
            let _ = writeln!(
                err,
                "glassbox: no GPU monitoring on this machine ({why}); reporting no GPUs"
            );
        }
        source
    })
}

/// The GPUs of this machine (empty without NVML), for a worker's
/// [`Hardware`](crate::Hardware).
pub fn gpus() -> Vec<Gpu> {
    shared().gpus()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_means_no_gpus_and_says_why() {
        let source = NvmlSource::open_library(OsStr::new("/nonexistent/libnvidia-ml.so.1"));
        let why = source.unavailable().expect("the library does not exist");
        assert!(why.contains("/nonexistent/libnvidia-ml.so.1"), "{why}");
        assert!(source.gpus().is_empty());
        assert!(source.sample().is_empty());
    }

    #[test]
    fn this_machine_answers_without_panicking_and_consistently() {
        // No GPU here: NVML is absent (or finds no device) and both lists
        // are empty. On a GPU machine both list the same devices.
        let source = shared();
        let gpus = source.gpus();
        let sample = source.sample();
        assert_eq!(gpus.len(), sample.len());
        if source.unavailable().is_some() {
            assert!(gpus.is_empty());
        }
        for (g, s) in gpus.iter().zip(&sample) {
            assert_eq!(g.name, s.name);
            assert_eq!(Some(g.memory_bytes), s.memory_total_bytes);
        }
        assert_eq!(
            super::gpus(),
            gpus,
            "`gpus()` answers what the shared source does"
        );
    }

    #[test]
    fn memory_ratio_needs_both_readings_and_a_total() {
        let mut s = GpuStats {
            index: 0,
            name: "x".into(),
            utilization: None,
            memory_used_bytes: Some(30),
            memory_total_bytes: Some(120),
            temperature_celsius: None,
            power_watts: None,
            power_limit_watts: None,
        };
        assert_eq!(s.memory_ratio(), Some(0.25));
        s.memory_total_bytes = Some(0);
        assert_eq!(s.memory_ratio(), None);
        s.memory_total_bytes = None;
        assert_eq!(s.memory_ratio(), None);
    }

    /// On a machine with an NVIDIA GPU and driver (`cargo test -p
    /// glassbox-cluster -- --ignored gpu`): every reading is there and sane.
    #[test]
    #[ignore = "needs an NVIDIA GPU and driver"]
    fn gpu_machine_reads_every_gauge() {
        let source = NvmlSource::open();
        assert_eq!(source.unavailable(), None);
        let sample = source.sample();
        assert!(!sample.is_empty(), "no GPU found");
        for s in &sample {
            println!("{s:?}");
            let u = s.utilization.expect("utilisation");
            assert!((0.0..=1.0).contains(&u));
            let total = s.memory_total_bytes.expect("memory total");
            assert!(s.memory_used_bytes.expect("memory used") <= total);
            let t = s.temperature_celsius.expect("temperature");
            assert!((0.0..130.0).contains(&t), "{t} °C");
            assert!(s.power_watts.expect("power") > 0.0);
        }
        for g in source.gpus() {
            println!("{g:?}");
            assert!(g.compute_capability.is_some());
        }
    }
}
