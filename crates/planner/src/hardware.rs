//! The hardware catalogue: accelerators as data, with a source for every figure.
//!
//! The built-in list lives in `data/hardware.toml` (embedded at compile time) so
//! that figures are reviewed as data, not code; users add or replace entries
//! with their own TOML file of the same shape.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{PlannerError, did_you_mean};
use crate::names;
use crate::quant::ComputeDtype;

const BUILTIN: &str = include_str!("../data/hardware.toml");

/// The kind of device, which selects default efficiency factors: the same
/// roofline is reached very differently by a datacenter GPU and a laptop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HardwareClass {
    Datacenter,
    Consumer,
    Apple,
    Cpu,
    Npu,
}

impl HardwareClass {
    pub const ALL: [Self; 5] = [
        Self::Datacenter,
        Self::Consumer,
        Self::Apple,
        Self::Cpu,
        Self::Npu,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Datacenter => "datacenter",
            Self::Consumer => "consumer",
            Self::Apple => "apple",
            Self::Cpu => "cpu",
            Self::Npu => "npu",
        }
    }

    /// A discrete GPU (NVIDIA or AMD, datacenter or consumer): what CUDA
    /// graphs, kernel boundaries and tensor-core tiles apply to.
    pub fn is_gpu(self) -> bool {
        matches!(self, Self::Datacenter | Self::Consumer)
    }

    pub fn parse(s: &str) -> Result<Self, PlannerError> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| PlannerError::UnknownValue {
                what: "hardware class",
                value: s.to_string(),
                suggestion: did_you_mean(s, Self::ALL.iter().map(|c| c.as_str())),
                choices: Self::ALL.map(|c| c.as_str()).join(", "),
            })
    }
}

impl fmt::Display for HardwareClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The link between devices used for tensor parallelism.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interconnect {
    pub name: String,
    /// Per-direction bandwidth per device, GB/s.
    pub gbps: f64,
}

/// Bytes in a GiB.
pub const GIB: f64 = 1_073_741_824.0;

/// Clocks (MHz) of a device whose datasheet peaks assume a boost clock it
/// does not hold under dense matrix work. AMD computes the MI300X's peaks at
/// its 2,100 MHz maximum engine clock, and measures its dense GEMMs running
/// at a median 1,207 MHz (BF16) and 1,230 MHz (FP8) under the 750 W power
/// limit ("Measuring Max-Achievable FLOPs, Part 2", ROCm blogs, 2025): a
/// compute-bound step runs at `clock / boost` of the datasheet rate before
/// any software efficiency. The lightly loaded decode matvec still boosts
/// (the same post), and bandwidth is not scaled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixClock {
    /// The clock the datasheet peaks are computed at.
    pub boost: f64,
    /// Median clock during dense 16-bit GEMMs.
    pub fp16: f64,
    /// Median clock during dense 8-bit GEMMs.
    pub fp8: f64,
}

/// One accelerator. All rates are dense peaks per device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hardware {
    pub id: String,
    pub name: String,
    pub class: HardwareClass,
    /// An NVIDIA GPU's CUDA compute capability (8.6 for an RTX 3090, 9.0 for
    /// an H100); `None` for other vendors and where unknown. Engines gate
    /// kernels and CUDA graphs on it ([`Hardware::is_nvidia_ampere_or_newer`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<f64>,
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Memory as the datasheet states it. GPU and accelerator memory is
    /// sold in binary units: an "80GB" H100 or A100 holds 80 GiB (nvidia-smi
    /// shows 81,559 and 81,920 MiB), a "24GB" RTX 4090 24 GiB, so
    /// [`Hardware::memory_bytes`] reads it as GiB.
    pub memory_gb: f64,
    pub bandwidth_gbps: f64,
    pub fp16_tflops: f64,
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    #[serde(default)]
    pub int8_tops: Option<f64>,
    /// Dense FP4 tensor rate (Blackwell NVFP4/MXFP4), where the device has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp4_tflops: Option<f64>,
    /// A card on GeForce silicon whose FP16 tensor rate is the same with FP16
    /// and FP32 accumulation (NVIDIA's workstation cards, RTX A6000, and the
    /// datacenter cards on those dies, T4, A10, A40, L4, L40, L40S), where a
    /// GeForce card runs FP32 accumulation at half its FP16-accumulate rate
    /// ([`Hardware::fp16_tflops_for`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp32_accumulate_full_rate: bool,
    /// The clock the device holds under dense matrix work, where its vendor
    /// publishes one below the clock its datasheet peaks assume
    /// ([`MatrixClock`]); `None` where the datasheet peak's clock holds.
    #[serde(default)]
    pub matrix_clock_mhz: Option<MatrixClock>,
    /// Bandwidth a published streaming benchmark measured, GB/s, where one
    /// is cited ([`crate::stream`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_gbps: Option<f64>,
    pub tdp_w: f64,
    pub interconnect: Interconnect,
    #[serde(default)]
    pub hourly_usd: Option<f64>,
    #[serde(default)]
    pub purchase_usd: Option<f64>,
    pub source: String,
}

impl Hardware {
    /// Device memory in bytes: `memory_gb` GiB (see the field).
    pub fn memory_bytes(&self) -> f64 {
        self.memory_gb * GIB
    }

    /// An NVIDIA A100 of any memory size or form factor (some engines'
    /// defaults single it out).
    pub fn is_a100(&self) -> bool {
        self.id.contains("a100") || self.name.to_ascii_lowercase().contains("a100")
    }

    /// An NVIDIA GPU of compute capability 8.0 or later (Ampere, Ada,
    /// Hopper, Blackwell); false for Volta, Turing, other vendors and a
    /// device whose capability the catalogue does not give.
    pub fn is_nvidia_ampere_or_newer(&self) -> bool {
        self.compute_capability.is_some_and(|cc| cc >= 8.0)
    }

    /// A datacenter NVIDIA card built on a GeForce die (compute capability
    /// 7.5, 8.6, 8.9 or 12.x: T4, A10, A10G, A40, L4, L40, L40S), where the
    /// A100, H100 and B200 (8.0, 9.0, 10.0) are HBM dies with another SM.
    /// llama.cpp's kernels run on such a card as on its GeForce siblings
    /// (docs/planner.md, "Datacenter cards on GeForce silicon").
    pub fn is_geforce_die_datacenter_card(&self) -> bool {
        self.class == HardwareClass::Datacenter
            && self
                .compute_capability
                .is_some_and(|cc| [7.5, 8.6, 8.9].contains(&cc) || (12.0..13.0).contains(&cc))
    }

    /// Peak dense rate (TFLOPS or TOPS) for a compute dtype, falling back to
    /// FP16 where the device has no faster path (an FP8 model on an A100 runs
    /// its matmuls in FP16). FP32 is taken as half the FP16 tensor rate (TF32).
    /// On a device with a published [`MatrixClock`] the rate is the one at
    /// the clock it holds under dense matrix work; [`Self::datasheet_tflops`]
    /// is the rate as published.
    pub fn peak_tflops(&self, dtype: ComputeDtype) -> f64 {
        let (clock16, clock8) = self
            .matrix_clock_mhz
            .map_or((1.0, 1.0), |c| (c.fp16 / c.boost, c.fp8 / c.boost));
        let sixteen = matches!(dtype, ComputeDtype::Fp16 | ComputeDtype::Fp32)
            || self.eight_bit_rate(dtype).is_none();
        let clock = if sixteen { clock16 } else { clock8 };
        self.datasheet_tflops(dtype) * clock
    }

    /// The datasheet's dense rate for a compute dtype, with the fallbacks of
    /// [`Self::peak_tflops`] and no matrix clock: what the seed articles'
    /// back-of-envelope formulas read.
    pub fn datasheet_tflops(&self, dtype: ComputeDtype) -> f64 {
        match dtype {
            ComputeDtype::Fp32 => self.fp16_tflops / 2.0,
            ComputeDtype::Fp16 => self.fp16_tflops,
            _ => self.eight_bit_rate(dtype).unwrap_or(self.fp16_tflops),
        }
    }

    /// The device's own rate for an 8-bit-or-narrower dtype, if it has one.
    fn eight_bit_rate(&self, dtype: ComputeDtype) -> Option<f64> {
        match dtype {
            ComputeDtype::Fp32 | ComputeDtype::Fp16 => None,
            ComputeDtype::Fp8 => self.fp8_tflops,
            ComputeDtype::Fp4 => self.fp4_tflops,
            ComputeDtype::Mxfp4 => self.fp4_tflops.and(self.fp8_tflops),
            ComputeDtype::Int8 => self.int8_tops.or(self.fp8_tflops),
        }
    }

    /// [`Self::peak_tflops`] for an engine whose FP16 matmuls accumulate in
    /// FP16 (`fp16_accumulate`: llama.cpp's CUDA prompt GEMMs run
    /// `cublasGemmEx` with `CUBLAS_COMPUTE_16F`, ggml-org/llama.cpp#3412 and
    /// #3776; its PR #3816 found FP32 accumulation faster on an A6000 and
    /// slower on a 3090). A GeForce card does that at twice the
    /// FP32-accumulate rate the catalogue lists, and the consumer factors for
    /// those engines are fitted in that listed basis; a card without the
    /// half-rate penalty ([`Self::fp32_accumulate_full_rate`]) gains nothing
    /// from FP16 accumulation, so in that basis it counts half its rate: an
    /// RTX A6000's 154.8 TFLOPS enter as 77.4 against the RTX 3090's 71.
    pub fn fp16_tflops_for(&self, dtype: ComputeDtype, fp16_accumulate: bool) -> f64 {
        let rate = self.peak_tflops(dtype);
        let sixteen = matches!(dtype, ComputeDtype::Fp16) || self.eight_bit_rate(dtype).is_none();
        if fp16_accumulate
            && sixteen
            && (self.class == HardwareClass::Consumer || self.is_geforce_die_datacenter_card())
            && self.fp32_accumulate_full_rate
        {
            rate / 2.0
        } else {
            rate
        }
    }

    /// The highest 8-bit-or-better rate, used by seed 000's "effective TOPS".
    pub fn best_tops(&self) -> f64 {
        self.int8_tops
            .or(self.fp8_tflops)
            .unwrap_or(self.fp16_tflops)
    }

    fn validate(&self, origin: &str) -> Result<(), PlannerError> {
        let checks = [
            ("memory_gb", self.memory_gb),
            ("bandwidth_gbps", self.bandwidth_gbps),
            ("fp16_tflops", self.fp16_tflops),
            ("stream_gbps", self.stream_gbps.unwrap_or(1.0)),
        ];
        for (field, v) in checks {
            if !(v.is_finite() && v > 0.0) {
                return Err(PlannerError::invalid(
                    format!("{origin}: gpu `{}`.{field}", self.id),
                    format!("must be a positive number, got {v}"),
                ));
            }
        }
        if let Some(cc) = self.compute_capability
            && !(cc.is_finite() && (1.0..100.0).contains(&cc))
        {
            return Err(PlannerError::invalid(
                format!("{origin}: gpu `{}`.compute_capability", self.id),
                format!("must be a CUDA compute capability like 8.6, got {cc}"),
            ));
        }
        if let Some(c) = self.matrix_clock_mhz {
            let ok = [c.boost, c.fp16, c.fp8]
                .iter()
                .all(|v| v.is_finite() && *v > 0.0 && *v <= c.boost);
            if !ok {
                return Err(PlannerError::invalid(
                    format!("{origin}: gpu `{}`.matrix_clock_mhz", self.id),
                    format!(
                        "clocks must be positive and at most `boost`, got boost {}, fp16 {}, fp8 {}",
                        c.boost, c.fp16, c.fp8
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl names::Named for Hardware {
    fn id(&self) -> &str {
        &self.id
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn display_name(&self) -> &str {
        &self.name
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    #[serde(default)]
    gpu: Vec<Hardware>,
}

/// The accelerators the planner knows about.
#[derive(Debug, Clone)]
pub struct HardwareCatalogue {
    gpus: Vec<Hardware>,
}

impl HardwareCatalogue {
    /// The catalogue shipped in `data/hardware.toml`.
    pub fn builtin() -> Result<Self, PlannerError> {
        let gpus = parse(BUILTIN, "builtin hardware.toml")?;
        Ok(Self { gpus })
    }

    /// Adds or replaces (by `id`) entries from a user TOML file.
    pub fn merge_file(&mut self, path: &Path) -> Result<(), PlannerError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlannerError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.merge_str(&text, &path.display().to_string())
    }

    /// Adds or replaces entries from TOML text.
    pub fn merge_str(&mut self, text: &str, origin: &str) -> Result<(), PlannerError> {
        for gpu in parse(text, origin)? {
            match self.gpus.iter_mut().find(|g| g.id == gpu.id) {
                Some(slot) => *slot = gpu,
                None => self.gpus.push(gpu),
            }
        }
        Ok(())
    }

    pub fn all(&self) -> &[Hardware] {
        &self.gpus
    }

    /// Finds a device by id or alias, case-insensitively, else by the
    /// `names::device_key` of its id, aliases or name, so `nvidia-smi`'s
    /// "NVIDIA A100-SXM4-80GB" finds `a100-sxm-80gb`.
    pub fn get(&self, name: &str) -> Result<&Hardware, PlannerError> {
        names::find(&self.gpus, name, names::device_key).ok_or_else(|| PlannerError::UnknownGpu {
            name: name.to_string(),
            suggestion: names::suggestion(&self.gpus, name),
        })
    }
}

fn parse(text: &str, origin: &str) -> Result<Vec<Hardware>, PlannerError> {
    let file: CatalogueFile = toml::from_str(text).map_err(|e| PlannerError::Toml {
        origin: origin.to_string(),
        message: e.to_string(),
    })?;
    for g in &file.gpu {
        g.validate(origin)?;
    }
    Ok(file.gpu)
}

#[cfg(test)]
#[path = "hardware_tests.rs"]
mod tests;
