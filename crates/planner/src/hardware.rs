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
    /// A consumer-class card whose FP16 tensor rate is the same with FP16 and
    /// FP32 accumulation (NVIDIA's workstation and passive Ampere cards: RTX
    /// A6000, A40), where a GeForce card runs FP32 accumulation at half its
    /// FP16-accumulate rate ([`Hardware::fp16_tflops_for`]).
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
            && self.class == HardwareClass::Consumer
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
mod tests {
    use super::*;

    #[test]
    fn builtin_has_required_devices() {
        let c = HardwareCatalogue::builtin().unwrap();
        assert!(c.all().len() >= 20);
        for id in [
            "rtx-3090",
            "rtx-4090",
            "rtx-5090",
            "a10",
            "l4",
            "l40s",
            "a100-pcie-40gb",
        ] {
            c.get(id).unwrap();
        }
        for id in [
            "a100-sxm-80gb",
            "h100-pcie",
            "h100-sxm",
            "h200",
            "h20",
            "b200",
            "mi300x",
        ] {
            c.get(id).unwrap();
        }
        for id in ["a10g", "rtx-3090-ti", "mi250x", "apple-m2-max"] {
            let g = c.get(id).unwrap();
            assert!(g.source.len() > 20, "{id} needs a source");
        }
        for id in ["apple-m2-ultra", "ascend-910b", "cpu-generic"] {
            c.get(id).unwrap();
        }
        // Common cards beyond the issue's list: cloud (T4, V100, L40), consumer,
        // China-export, Grace Hopper, AMD and Apple.
        for id in [
            "t4",
            "v100-sxm2-32gb",
            "l40",
            "rtx-2080-ti",
            "rtx-3060",
            "rtx-4060-ti-16gb",
            "rtx-4070",
            "a800-sxm-80gb",
            "h800",
            "gh200",
            "mi210",
            "mi325x",
            "apple-m2-pro",
            "apple-m3-ultra",
            "apple-m4-pro",
        ] {
            let g = c.get(id).unwrap();
            assert!(g.source.len() > 20, "{id} needs a source");
        }
        assert!(c.all().iter().all(|g| !g.source.is_empty()));
    }

    #[test]
    fn alias_and_fallback_rates() {
        let c = HardwareCatalogue::builtin().unwrap();
        let a100 = c.get("A100").unwrap();
        assert_eq!(a100.id, "a100-sxm-80gb");
        // No FP8 on Ampere: FP8 models compute at the FP16 rate.
        assert_eq!(a100.peak_tflops(ComputeDtype::Fp8), 312.0);
        // Dense, not sparse: 1979 with sparsity halved to 989.
        assert_eq!(c.get("h100-sxm").unwrap().fp16_tflops, 989.0);
        // NVFP4 runs on Blackwell's FP4 tensor cores; MXFP4 weights meet
        // MXFP8 activations there, at the FP8 rate. Hopper has no FP4 units:
        // both are weight-only, at the BF16 rate.
        let b200 = c.get("b200").unwrap();
        assert_eq!(b200.peak_tflops(ComputeDtype::Fp4), 9000.0);
        assert_eq!(
            b200.peak_tflops(ComputeDtype::Mxfp4),
            b200.peak_tflops(ComputeDtype::Fp8)
        );
        let h100 = c.get("h100-sxm").unwrap();
        for fp4 in [ComputeDtype::Fp4, ComputeDtype::Mxfp4] {
            assert_eq!(h100.peak_tflops(fp4), h100.fp16_tflops);
        }
        let mi300x = c.get("mi300x").unwrap();
        assert_eq!(
            mi300x.peak_tflops(ComputeDtype::Mxfp4),
            mi300x.peak_tflops(ComputeDtype::Fp16)
        );
        assert_eq!(c.get("g5").unwrap().id, "a10g");
    }

    #[test]
    fn mi300x_and_t4_compute_at_the_clock_measured_under_dense_gemm_load() {
        let c = HardwareCatalogue::builtin().unwrap();
        let mi300x = c.get("mi300x").unwrap();
        // The datasheet peaks stay as published (plans and comparisons show them).
        assert_eq!(mi300x.fp16_tflops, 1307.4);
        // AMD's own arithmetic: 1,207 MHz x 304 CUs x 4,096 ops = 751 TFLOPS BF16.
        let sixteen = mi300x.peak_tflops(ComputeDtype::Fp16);
        assert!((sixteen - 751.5).abs() < 1.0, "{sixteen}");
        let eight = mi300x.peak_tflops(ComputeDtype::Fp8);
        assert!((eight - 2614.9 * 1230.0 / 2100.0).abs() < 1e-9, "{eight}");
        assert_eq!(mi300x.datasheet_tflops(ComputeDtype::Fp8), 2614.9);
        // The T4 under continuous dense work: its 70 W cap holds it near the
        // 585 MHz base clock (about 24 of its 65 TFLOPS in cuBLAS FP16).
        let t4 = c.get("t4").unwrap();
        let t4_16 = t4.peak_tflops(ComputeDtype::Fp16);
        assert!((t4_16 - 65.0 * 585.0 / 1590.0).abs() < 1e-9, "{t4_16}");
        assert!((23.0..25.0).contains(&t4_16), "{t4_16}");
        // Devices without a published matrix clock keep their datasheet peak.
        let h100 = c.get("h100-sxm").unwrap();
        assert_eq!(h100.peak_tflops(ComputeDtype::Fp16), h100.fp16_tflops);
        // An FP8 model on an A100 computes at the FP16 rate, and so at the
        // 16-bit clock on a device that has one.
        let a100 = c.get("a100-sxm-80gb").unwrap();
        assert_eq!(a100.peak_tflops(ComputeDtype::Fp8), a100.fp16_tflops);
    }

    #[test]
    fn a_matrix_clock_above_the_boost_clock_is_refused() {
        let text = r#"
[[gpu]]
id = "x"
name = "X"
class = "datacenter"
memory_gb = 80
bandwidth_gbps = 2000
fp16_tflops = 300
matrix_clock_mhz = { boost = 1500, fp16 = 1600, fp8 = 1400 }
tdp_w = 400
interconnect = { name = "PCIe", gbps = 32 }
source = "test"
"#;
        let e = parse(text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("matrix_clock_mhz") && e.contains("1600"), "{e}");
    }

    #[test]
    fn names_as_nvidia_smi_and_spec_sheets_print_them_find_their_device() {
        let c = HardwareCatalogue::builtin().unwrap();
        for (name, id) in [
            ("NVIDIA H100 80GB HBM3", "h100-sxm"),
            ("NVIDIA H100 PCIe", "h100-pcie"),
            ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
            ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
            ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
            ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
            ("NVIDIA A10G", "a10g"),
            ("NVIDIA L40S", "l40s"),
            ("Tesla T4", "t4"),
            ("Tesla V100-SXM2-16GB", "v100-sxm2-16gb"),
            ("NVIDIA GeForce RTX 4090", "rtx-4090"),
            ("NVIDIA GeForce RTX 3090 Ti", "rtx-3090-ti"),
            ("RTX 4090", "rtx-4090"),
            ("rtx4090", "rtx-4090"),
            ("AMD Instinct MI300X", "mi300x"),
            ("Apple M2 Max", "apple-m2-max"),
            ("NVIDIA H100 NVL", "h100-nvl"),
            ("NVIDIA GeForce RTX 4060 Ti", "rtx-4060-ti"),
            ("NVIDIA GeForce RTX 4070 SUPER", "rtx-4070-super"),
            ("NVIDIA GeForce RTX 5080", "rtx-5080"),
            ("Apple M3 Pro", "apple-m3-pro"),
            ("Apple M1 Ultra", "apple-m1-ultra"),
            ("NVIDIA RTX A6000", "rtx-a6000"),
            ("NVIDIA A40", "a40"),
            (
                "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                "rtx-pro-6000",
            ),
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                "rtx-pro-6000",
            ),
            ("Tesla V100-PCIE-16GB", "v100-pcie-16gb"),
            ("Tesla V100-PCIE-32GB", "v100-pcie-32gb"),
            ("AMD Instinct MI100", "mi100"),
        ] {
            assert_eq!(c.get(name).unwrap().id, id, "{name}");
        }
        // A loose match never invents a device (the RTX 6000 Ada is left
        // out of the catalogue on purpose: docs/planner.md).
        assert!(matches!(
            c.get("NVIDIA RTX 6000 Ada Generation"),
            Err(PlannerError::UnknownGpu { .. })
        ));
        // Nor does the 300 W Max-Q edition become the 600 W card.
        assert!(matches!(
            c.get("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
            Err(PlannerError::UnknownGpu { .. })
        ));
    }

    #[test]
    fn fp16_accumulation_is_worth_twice_on_geforce_only() {
        // The consumer factors of llama.cpp are fitted on GeForce cards'
        // FP32-accumulate rates; a workstation card enters at half its rate
        // in that basis, since FP16 accumulation gains it nothing.
        let c = HardwareCatalogue::builtin().unwrap();
        let a6000 = c.get("rtx-a6000").unwrap();
        let r3090 = c.get("rtx-3090").unwrap();
        assert_eq!(a6000.fp16_tflops_for(ComputeDtype::Fp16, true), 77.4);
        assert_eq!(a6000.fp16_tflops_for(ComputeDtype::Fp16, false), 154.8);
        assert_eq!(r3090.fp16_tflops_for(ComputeDtype::Fp16, true), 71.0);
        let ratio = a6000.fp16_tflops_for(ComputeDtype::Fp16, true) / 71.0;
        assert!((1.05..1.15).contains(&ratio), "{ratio}");
        // Datacenter cards and other dtypes are not touched.
        let a100 = c.get("a100-sxm-80gb").unwrap();
        assert_eq!(a100.fp16_tflops_for(ComputeDtype::Fp16, true), 312.0);
        assert_eq!(a6000.fp16_tflops_for(ComputeDtype::Int8, true), 309.7);
    }

    #[test]
    fn no_two_devices_share_a_loose_name() {
        let c = HardwareCatalogue::builtin().unwrap();
        let mut seen = std::collections::HashMap::new();
        for g in c.all() {
            for n in names::spellings(g) {
                let key = names::device_key(n);
                if let Some(other) = seen.insert(key.clone(), g.id.as_str()) {
                    assert_eq!(other, g.id, "`{key}` names both {other} and {}", g.id);
                }
            }
        }
    }

    #[test]
    fn override_replaces_by_id() {
        let mut c = HardwareCatalogue::builtin().unwrap();
        let n = c.all().len();
        let extra = r#"
[[gpu]]
id = "rtx-3090"
name = "My 3090"
class = "consumer"
memory_gb = 24
bandwidth_gbps = 900
fp16_tflops = 70
tdp_w = 350
interconnect = { name = "PCIe", gbps = 32 }
source = "mine"

[[gpu]]
id = "my-npu"
name = "My NPU"
class = "npu"
memory_gb = 32
bandwidth_gbps = 400
fp16_tflops = 100
tdp_w = 75
interconnect = { name = "PCIe", gbps = 16 }
source = "vendor sheet"
"#;
        c.merge_str(extra, "test").unwrap();
        assert_eq!(c.all().len(), n + 1);
        assert_eq!(c.get("rtx-3090").unwrap().bandwidth_gbps, 900.0);
        assert_eq!(c.get("my-npu").unwrap().class, HardwareClass::Npu);
    }

    #[test]
    fn bad_override_is_an_error() {
        let mut c = HardwareCatalogue::builtin().unwrap();
        let e = c.merge_str("[[gpu]]\nid = 3", "x.toml").unwrap_err();
        assert_eq!(e.code(), "planner.toml");
    }
}
