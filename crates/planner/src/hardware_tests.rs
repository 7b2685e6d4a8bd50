//! Tests of the hardware catalogue: the built-in devices, names people
//! paste, rates and merging a user's file.

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

/// A catalogue file of one datacenter device with `extra` among its fields.
fn one_device(extra: &str) -> String {
    format!(
        "[[gpu]]\nid = \"x\"\nname = \"X\"\nclass = \"datacenter\"\nmemory_gb = 80\n\
         bandwidth_gbps = 2000\nfp16_tflops = 300\n{extra}\ntdp_w = 400\n\
         interconnect = {{ name = \"PCIe\", gbps = 32 }}\nsource = \"test\"\n"
    )
}

#[test]
fn a_matrix_clock_above_the_boost_clock_is_refused() {
    let text = one_device("matrix_clock_mhz = { boost = 1500, fp16 = 1600, fp8 = 1400 }");
    let e = parse(&text, "t.toml").unwrap_err().to_string();
    assert!(e.contains("matrix_clock_mhz") && e.contains("1600"), "{e}");
}

#[test]
fn every_nvidia_device_names_its_compute_capability() {
    // Engines gate CUDA graphs and kernels on it; other vendors have none.
    let c = HardwareCatalogue::builtin().unwrap();
    for hw in c.all() {
        let nvidia = hw.name.starts_with("NVIDIA");
        assert_eq!(hw.compute_capability.is_some(), nvidia, "{}", hw.id);
    }
    let cc = |id: &str| c.get(id).unwrap().is_nvidia_ampere_or_newer();
    assert!(cc("a100-sxm-80gb") && cc("rtx-3090") && cc("l4") && cc("h100-sxm") && cc("b200"));
    assert!(!cc("v100-sxm2-32gb") && !cc("t4") && !cc("rtx-2080-ti") && !cc("mi300x"));
    // Every Blackwell device has FP4 tensor cores: NVFP4 matmuls must not
    // fall back to the FP16 rate for want of a figure.
    for hw in c.all() {
        if hw.compute_capability.is_some_and(|v| v >= 10.0) {
            assert!(hw.fp4_tflops.is_some(), "{}", hw.id);
        }
    }
    let e = parse(&one_device("compute_capability = 0"), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("compute_capability") && e.contains("8.6"), "{e}");
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
    // HBM datacenter cards and other dtypes are not touched.
    let a100 = c.get("a100-sxm-80gb").unwrap();
    assert_eq!(a100.fp16_tflops_for(ComputeDtype::Fp16, true), 312.0);
    assert!(!a100.is_geforce_die_datacenter_card());
    assert_eq!(a6000.fp16_tflops_for(ComputeDtype::Int8, true), 309.7);
    // Datacenter cards on GeForce dies enter as workstation cards do; the
    // A10G's listed 70 is already the half-rate figure.
    let l40s = c.get("l40s").unwrap();
    assert!(l40s.is_geforce_die_datacenter_card());
    assert_eq!(l40s.fp16_tflops_for(ComputeDtype::Fp16, true), 181.0);
    assert_eq!(l40s.fp16_tflops_for(ComputeDtype::Fp16, false), 362.0);
    let a10g = c.get("a10g").unwrap();
    assert_eq!(a10g.fp16_tflops_for(ComputeDtype::Fp16, true), 70.0);
    let a10 = c.get("a10").unwrap();
    assert_eq!(a10.fp16_tflops_for(ComputeDtype::Fp16, true), 62.5);
    assert!(
        !c.get("v100-pcie-16gb")
            .unwrap()
            .is_geforce_die_datacenter_card()
    );
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
