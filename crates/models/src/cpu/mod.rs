//! CPU kernels chosen at run time.
//!
//! llama.cpp's CPU backend is built once per x86-64 level (ggml's
//! `GGML_CPU_ALL_VARIANTS`: `x64`, `sse42`, `haswell`, `skylakex`, `zen4`, ...),
//! each as its own shared library. Before the first model loads, this module
//! reads the running CPU's features, picks the best variant whose every
//! instruction set the CPU (and the OS) supports, and loads that one library.
//! Nothing is compiled for the build machine: the same build runs on any
//! x86-64 machine and still uses AVX2 / AVX-512 / VNNI / BF16 where present.
//!
//! ggml's AMX variant (`sapphirerapids`) is chosen on a CPU with AMX, its
//! prompts and batched steps ~3-4x faster, but only from a library that
//! carries [`AMX_MARK`]: built by GCC before 14 without the build's fix
//! (`crates/models/cmake/`), its AMX matmul faults at the first tile load
//! (docs/adr/0004-cpu-kernels.md, "AMX"). An AMX Xeon with an unmarked
//! library gets the `zen4` variant (AVX-512 with VBMI, VNNI and BF16), and the
//! choice's reason says how to get AMX. Set
//! `GLASSBOX_CPU_VARIANT=NAME` to force a variant (it must still be supported),
//! and `GLASSBOX_GGML_BACKENDS=DIR` to load the variants from another folder.

pub mod bound;
mod marks;
pub mod topology;

use marks::UNMARKED;
pub use marks::{
    AMX_MARK, FLASH_ATTN_ROWS_MARK, MUL_MAT_ROWS8_MARK, carries_amx_mark, carries_mark,
};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// An instruction-set extension a kernel variant may require.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    Sse42,
    Avx,
    F16c,
    Fma,
    Bmi2,
    Avx2,
    AvxVnni,
    /// AVX-512 F, CD, VL, DQ and BW together (what ggml calls `AVX512`).
    Avx512,
    Avx512Vbmi,
    Avx512Vnni,
    Avx512Bf16,
    AmxTile,
    AmxInt8,
    AmxBf16,
}

impl Feature {
    /// Every feature, in the order they are listed.
    pub const ALL: [Feature; 14] = [
        Self::Sse42,
        Self::Avx,
        Self::F16c,
        Self::Fma,
        Self::Bmi2,
        Self::Avx2,
        Self::AvxVnni,
        Self::Avx512,
        Self::Avx512Vbmi,
        Self::Avx512Vnni,
        Self::Avx512Bf16,
        Self::AmxTile,
        Self::AmxInt8,
        Self::AmxBf16,
    ];

    /// The name `/proc/cpuinfo`-style tools use.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sse42 => "SSE4.2",
            Self::Avx => "AVX",
            Self::F16c => "F16C",
            Self::Fma => "FMA",
            Self::Bmi2 => "BMI2",
            Self::Avx2 => "AVX2",
            Self::AvxVnni => "AVX-VNNI",
            Self::Avx512 => "AVX-512",
            Self::Avx512Vbmi => "AVX-512-VBMI",
            Self::Avx512Vnni => "AVX-512-VNNI",
            Self::Avx512Bf16 => "AVX-512-BF16",
            Self::AmxTile => "AMX-TILE",
            Self::AmxInt8 => "AMX-INT8",
            Self::AmxBf16 => "AMX-BF16",
        }
    }

    /// The weight ggml's variant score gives this feature
    /// (`ggml-cpu/arch/x86/cpu-feats.cpp`): more capable, higher.
    fn score(self) -> u32 {
        match self {
            Self::Fma => 1,
            Self::F16c => 1 << 1,
            Self::Sse42 => 1 << 2,
            Self::Bmi2 => 1 << 3,
            Self::Avx => 1 << 4,
            Self::Avx2 => 1 << 5,
            Self::AvxVnni => 1 << 6,
            Self::Avx512 => 1 << 7,
            Self::Avx512Vbmi => 1 << 8,
            Self::Avx512Bf16 => 1 << 9,
            Self::Avx512Vnni => 1 << 10,
            Self::AmxInt8 => 1 << 11,
            Self::AmxTile | Self::AmxBf16 => 0,
        }
    }
}

/// What the running CPU is and supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuInfo {
    /// The model name (`/proc/cpuinfo`), or the architecture where unknown.
    pub model: String,
    /// Logical cores this process may use.
    pub cores: usize,
    /// The features found, usable by this process (OS support included).
    pub features: Vec<Feature>,
}

impl CpuInfo {
    /// Reads the running CPU.
    pub fn detect() -> Self {
        Self {
            model: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            features: detect_features(),
        }
    }

    pub fn has(&self, feature: Feature) -> bool {
        self.features.contains(&feature)
    }
}

#[cfg(target_arch = "x86_64")]
fn detect_features() -> Vec<Feature> {
    use std::arch::is_x86_feature_detected as has;
    let mut found = Vec::new();
    let mut add = |yes: bool, f: Feature| {
        if yes {
            found.push(f);
        }
    };
    add(has!("sse4.2"), Feature::Sse42);
    add(has!("avx"), Feature::Avx);
    add(has!("f16c"), Feature::F16c);
    add(has!("fma"), Feature::Fma);
    add(has!("bmi2"), Feature::Bmi2);
    add(has!("avx2"), Feature::Avx2);
    add(has!("avxvnni"), Feature::AvxVnni);
    add(
        has!("avx512f")
            && has!("avx512cd")
            && has!("avx512vl")
            && has!("avx512dq")
            && has!("avx512bw"),
        Feature::Avx512,
    );
    add(has!("avx512vbmi"), Feature::Avx512Vbmi);
    add(has!("avx512vnni"), Feature::Avx512Vnni);
    add(has!("avx512bf16"), Feature::Avx512Bf16);
    // AMX detection is not stable in `is_x86_feature_detected!`; CPUID leaf 7
    // says whether the CPU has it. Whether the OS lets this process use the
    // tiles is ggml's check (it asks Linux for the tile state at load and
    // uses no tile without it).
    let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
    add(leaf7.edx & (1 << 24) != 0, Feature::AmxTile);
    add(leaf7.edx & (1 << 25) != 0, Feature::AmxInt8);
    add(leaf7.edx & (1 << 22) != 0, Feature::AmxBf16);
    found
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_features() -> Vec<Feature> {
    Vec::new()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned())
}

/// One of ggml's x86-64 CPU kernel builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// The name in the library's file name (`libggml-cpu-NAME.so`).
    pub name: &'static str,
    /// What it was compiled for: every one must be present to load it.
    pub requires: &'static [Feature],
}

impl Variant {
    /// Whether `cpu` can run every instruction this variant was built with.
    pub fn runs_on(&self, cpu: &CpuInfo) -> bool {
        self.requires.iter().all(|f| cpu.has(*f))
    }

    fn score(&self) -> u32 {
        1 + self.requires.iter().map(|f| f.score()).sum::<u32>()
    }
}

use Feature::{
    AmxInt8, AmxTile, Avx, Avx2, Avx512, Avx512Bf16, Avx512Vbmi, Avx512Vnni, AvxVnni, Bmi2, F16c,
    Fma, Sse42,
};

const AVX512_BASE: [Feature; 7] = [Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512];

/// ggml's x86-64 variants (`ggml/src/CMakeLists.txt`, `GGML_CPU_ALL_VARIANTS`).
pub const X86_VARIANTS: &[Variant] = &[
    Variant {
        name: "x64",
        requires: &[],
    },
    Variant {
        name: "sse42",
        requires: &[Sse42],
    },
    Variant {
        name: "sandybridge",
        requires: &[Sse42, Avx],
    },
    Variant {
        name: "ivybridge",
        requires: &[Sse42, Avx, F16c],
    },
    Variant {
        name: "piledriver",
        requires: &[Sse42, Avx, F16c, Fma],
    },
    Variant {
        name: "haswell",
        requires: &[Sse42, Avx, F16c, Fma, Avx2, Bmi2],
    },
    Variant {
        name: "skylakex",
        requires: &AVX512_BASE,
    },
    Variant {
        name: "cannonlake",
        requires: &[Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vbmi],
    },
    Variant {
        name: "cascadelake",
        requires: &[Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vnni],
    },
    Variant {
        name: "icelake",
        requires: &[
            Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vbmi, Avx512Vnni,
        ],
    },
    Variant {
        name: "cooperlake",
        requires: &[
            Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vnni, Avx512Bf16,
        ],
    },
    Variant {
        name: "zen4",
        requires: &[
            Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vbmi, Avx512Vnni, Avx512Bf16,
        ],
    },
    Variant {
        name: "alderlake",
        requires: &[Sse42, Avx, F16c, Fma, Avx2, Bmi2, AvxVnni],
    },
    Variant {
        name: "sapphirerapids",
        requires: &[
            Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vbmi, Avx512Vnni, Avx512Bf16, AmxTile,
            AmxInt8,
        ],
    },
];

/// The best variant for `cpu` among those `available`, by ggml's score.
/// `forced` picks one by name instead (it must still run on `cpu`).
pub fn choose_variant<'a>(
    cpu: &CpuInfo,
    available: &[&'a Variant],
    forced: Option<&str>,
) -> Result<&'a Variant, KernelError> {
    if let Some(name) = forced {
        let variant = X86_VARIANTS
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| KernelError::UnknownVariant {
                name: name.to_owned(),
            })?;
        if !variant.runs_on(cpu) {
            let missing = variant
                .requires
                .iter()
                .filter(|f| !cpu.has(**f))
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ");
            return Err(KernelError::Unsupported {
                name: name.to_owned(),
                missing,
            });
        }
        return available
            .iter()
            .find(|v| v.name == name)
            .copied()
            .ok_or_else(|| KernelError::NotBuilt {
                name: name.to_owned(),
            });
    }
    available
        .iter()
        .filter(|v| v.runs_on(cpu))
        .max_by_key(|v| v.score())
        .copied()
        .ok_or(KernelError::NoneRuns)
}

/// The CPU kernels this process loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelChoice {
    /// The variant's name (`haswell`, `zen4`, ...); `ggml-default` where the
    /// platform has no variants and ggml chose by itself.
    pub variant: String,
    /// The library loaded.
    pub path: PathBuf,
    /// The features the variant uses.
    pub uses: Vec<Feature>,
    /// How it was chosen, in a sentence.
    pub reason: String,
}

impl KernelChoice {
    /// What multiplies quantised weights with this variant, in a phrase:
    /// ggml's AMX tiles, Glassbox's eight-row kernel for Q4_1 and Q8_0
    /// (AVX2 + FMA + F16C; `crates/models/kernels/mul-mat-rows8.cpp`), or
    /// ggml's dot products.
    pub fn weight_products(&self) -> &'static str {
        let has = |f: &Feature| self.uses.contains(f);
        if has(&Feature::AmxInt8) {
            "ggml's AMX tiles"
        } else if [Feature::Avx2, Feature::Fma, Feature::F16c].iter().all(has) {
            "Glassbox's eight-row kernel for Q4_1 and Q8_0 (ADR 0004), ggml's dot products for other types"
        } else {
            "ggml's dot products"
        }
    }
}

/// Why no CPU kernels could be loaded.
#[derive(Debug, Clone, thiserror::Error)]
pub enum KernelError {
    #[error(
        "no ggml CPU kernel libraries (libggml-cpu-*.so) in {searched}\n  hint: set GLASSBOX_GGML_BACKENDS to the folder that holds them (it ships beside the glassbox binary), or rebuild with `cargo build --release`"
    )]
    NotFound { searched: String },
    #[error(
        "unknown CPU variant `{name}` in GLASSBOX_CPU_VARIANT\n  hint: use one of x64, sse42, haswell, skylakex, icelake, zen4, ... (see `glassbox doctor`)"
    )]
    UnknownVariant { name: String },
    #[error("CPU variant `{name}` is not loaded: {why}\n  hint: unset GLASSBOX_CPU_VARIANT")]
    Excluded { name: String, why: &'static str },
    #[error(
        "this CPU cannot run CPU variant `{name}` (missing {missing})\n  hint: unset GLASSBOX_CPU_VARIANT to let Glassbox choose"
    )]
    Unsupported { name: String, missing: String },
    #[error(
        "CPU variant `{name}` was not built into this installation\n  hint: unset GLASSBOX_CPU_VARIANT"
    )]
    NotBuilt { name: String },
    #[error("none of the CPU kernel libraries runs on this CPU\n  hint: run `glassbox doctor`")]
    NoneRuns,
    #[error(
        "llama.cpp refused to load {path}\n  hint: run `glassbox doctor`; the file may be damaged"
    )]
    LoadFailed { path: PathBuf },
}

impl KernelError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "kernels_not_found",
            Self::UnknownVariant { .. } => "kernel_variant_unknown",
            Self::Excluded { .. } => "kernel_variant_excluded",
            Self::Unsupported { .. } => "kernel_variant_unsupported",
            Self::NotBuilt { .. } => "kernel_variant_not_built",
            Self::NoneRuns => "kernels_unsupported",
            Self::LoadFailed { .. } => "kernel_load_failed",
        }
    }
}

/// The folders searched for the kernel libraries, first match wins:
/// `GLASSBOX_GGML_BACKENDS`; `ggml-backends/` beside the executable (an
/// installed copy); the executable's own folder; the folder the build put them in.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("GLASSBOX_GGML_BACKENDS") {
        dirs.push(PathBuf::from(dir));
    }
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        dirs.push(exe_dir.join("ggml-backends"));
        dirs.push(exe_dir);
    }
    if let Some(built) = llama_cpp_sys_2::BACKENDS_DIR {
        dirs.push(PathBuf::from(built));
    }
    dirs
}

const PREFIX: &str = "libggml-cpu-";

/// The variants present in `dir`, with their files.
fn variants_in(dir: &Path) -> Vec<(&'static Variant, PathBuf)> {
    X86_VARIANTS
        .iter()
        .filter_map(|v| {
            let path = dir.join(format!(
                "{PREFIX}{}{}",
                v.name,
                std::env::consts::DLL_SUFFIX
            ));
            path.is_file().then_some((v, path))
        })
        .collect()
}

fn has_any_kernel(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
    })
}

/// Loads the CPU kernels once per process and says which; every later call
/// returns the first answer. Called before llama.cpp's backend starts.
pub fn load_kernels() -> Result<&'static KernelChoice, KernelError> {
    static CHOICE: OnceLock<Result<KernelChoice, KernelError>> = OnceLock::new();
    CHOICE
        .get_or_init(|| {
            let forced = std::env::var("GLASSBOX_CPU_VARIANT")
                .ok()
                .filter(|s| !s.is_empty());
            load_from(&search_dirs(), &CpuInfo::detect(), forced.as_deref())
        })
        .as_ref()
        .map_err(Clone::clone)
}

fn load_from(
    dirs: &[PathBuf],
    cpu: &CpuInfo,
    forced: Option<&str>,
) -> Result<KernelChoice, KernelError> {
    let dir = dirs
        .iter()
        .find(|d| has_any_kernel(d))
        .ok_or_else(|| KernelError::NotFound {
            searched: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let present = variants_in(dir);
    if present.is_empty() {
        // Not x86-64 (or an unknown layout): ggml scores what is there itself.
        ffi::load_all_from(dir);
        return Ok(KernelChoice {
            variant: "ggml-default".to_owned(),
            path: dir.clone(),
            uses: Vec::new(),
            reason: "chosen by ggml's own CPU scoring (no x86-64 variants found)".to_owned(),
        });
    }
    let (mut candidates, unmarked_amx) = loadable(&present, cpu, forced)?;
    loop {
        let variant = choose_variant(cpu, &candidates, forced)?;
        let path = present
            .iter()
            .find(|(v, _)| v.name == variant.name)
            .map(|(_, p)| p.clone())
            .ok_or(KernelError::NoneRuns)?;
        if ffi::load(&path) {
            let reason = match forced {
                Some(_) => "forced by GLASSBOX_CPU_VARIANT".to_owned(),
                None => format!(
                    "the most capable of the {} variants present that this CPU runs{}",
                    present.len(),
                    if unmarked_amx {
                        " (not the AMX one: its library lacks the build's tile-configuration \
                         fix; rebuild llama.cpp with `cargo clean`, then build, for AMX kernels)"
                    } else {
                        ""
                    }
                ),
            };
            return Ok(KernelChoice {
                variant: variant.name.to_owned(),
                path,
                uses: variant.requires.to_vec(),
                reason,
            });
        }
        if forced.is_some() {
            return Err(KernelError::LoadFailed { path });
        }
        // ggml's own check said no (it reads CPUID without the OS's view):
        // try the next best.
        candidates.retain(|v| v.name != variant.name);
    }
}

/// The variants of `present` that may be loaded, and whether an AMX library
/// was left out. The AMX library faults without the build's fix: one that
/// lacks its mark (an older build of llama-cpp-sys-2, a copied folder) is
/// never loaded. Forced, that is an error; chosen, the next best runs.
fn loadable<'a>(
    present: &[(&'a Variant, PathBuf)],
    cpu: &CpuInfo,
    forced: Option<&str>,
) -> Result<(Vec<&'a Variant>, bool), KernelError> {
    let unmarked_amx = matches!(forced, None | Some(AMX_VARIANT))
        && present
            .iter()
            .any(|(v, p)| v.name == AMX_VARIANT && v.runs_on(cpu) && !carries_amx_mark(p));
    if unmarked_amx && forced.is_some() {
        return Err(KernelError::Excluded {
            name: AMX_VARIANT.to_owned(),
            why: UNMARKED,
        });
    }
    let candidates = present
        .iter()
        .map(|(v, _)| *v)
        .filter(|v| !(unmarked_amx && v.name == AMX_VARIANT))
        .collect();
    Ok((candidates, unmarked_amx))
}

/// ggml's variant with AMX kernels.
pub const AMX_VARIANT: &str = "sapphirerapids";

/// The two calls into ggml's backend registry.
#[allow(unsafe_code)]
mod ffi {
    use std::ffi::CString;
    use std::path::Path;

    fn c_path(path: &Path) -> Option<CString> {
        CString::new(path.to_str()?).ok()
    }

    /// Loads one backend library; false if ggml refused it.
    pub(super) fn load(path: &Path) -> bool {
        let Some(c) = c_path(path) else {
            return false;
        };
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call;
        // ggml copies what it keeps and returns null on failure.
        let reg = unsafe { llama_cpp_sys_2::ggml_backend_load(c.as_ptr()) };
        !reg.is_null()
    }

    /// Lets ggml load the best backend of each kind found in `dir`.
    pub(super) fn load_all_from(dir: &Path) {
        if let Some(c) = c_path(dir) {
            // SAFETY: as above; the call only reads the string.
            unsafe { llama_cpp_sys_2::ggml_backend_load_all_from_path(c.as_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests;
