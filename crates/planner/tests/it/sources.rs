//! Model specs from config.json files and user hardware files.

use glassbox_planner::{HardwareCatalogue, ModelCatalogue, model_source};

fn temp(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("glassbox-planner-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("temp file");
    p
}

#[test]
fn mixtral_config_json_is_a_moe() {
    let p = temp(
        "config.json",
        r#"{"architectures":["MixtralForCausalLM"],"hidden_size":4096,"intermediate_size":14336,
        "num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,"vocab_size":32000,
        "num_local_experts":8,"num_experts_per_tok":2}"#,
    );
    let r = model_source::resolve(
        &p.display().to_string(),
        &ModelCatalogue::builtin().unwrap(),
    )
    .unwrap();
    assert_eq!(r.origin, "config.json");
    assert!((r.spec.total_params() / 1e9 - 46.7).abs() < 0.2);
    assert!((r.spec.active_params_b() - 12.9).abs() < 0.2);
}

#[test]
fn hardware_file_adds_a_device() {
    let p = temp(
        "hw.toml",
        "[[gpu]]\nid = \"lab-card\"\nname = \"Lab card\"\nclass = \"npu\"\nmemory_gb = 32\n\
         bandwidth_gbps = 800\nfp16_tflops = 200\ntdp_w = 300\n\
         interconnect = { name = \"PCIe\", gbps = 32 }\nhourly_usd = 1.0\nsource = \"lab\"\n",
    );
    let mut hw = HardwareCatalogue::builtin().unwrap();
    hw.merge_file(&p).unwrap();
    assert_eq!(hw.get("lab-card").unwrap().memory_gb, 32.0);
    let e = hw
        .merge_file(std::path::Path::new("/nonexistent/hw.toml"))
        .unwrap_err();
    assert_eq!(e.code(), "planner.io");
}

/// Regression (issue 17): `configs/llama-3-8b.json` was planned as "configs".
#[test]
fn config_file_is_named_after_the_model_not_its_folder() {
    let dir = std::env::temp_dir().join(format!(
        "glassbox-planner-it-{}/configs",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join("llama-3-8b.json");
    std::fs::write(
        &p,
        r#"{"hidden_size":4096,"intermediate_size":14336,"num_attention_heads":32,
        "num_hidden_layers":32,"num_key_value_heads":8,"vocab_size":128256}"#,
    )
    .expect("temp file");
    let r = model_source::resolve(
        &p.display().to_string(),
        &ModelCatalogue::builtin().unwrap(),
    )
    .unwrap();
    assert_eq!(
        (r.spec.id.as_str(), r.spec.name.as_str()),
        ("llama-3-8b", "llama-3-8b")
    );
}
