use super::*;

fn cpu(features: &[Feature]) -> CpuInfo {
    CpuInfo {
        model: "test".to_owned(),
        cores: 2,
        features: features.to_vec(),
    }
}

fn all() -> Vec<&'static Variant> {
    X86_VARIANTS.iter().collect()
}

#[test]
fn an_amx_xeon_gets_the_amx_variant_and_zen4_when_asked_for() {
    let spr = cpu(&Feature::ALL);
    assert_eq!(
        choose_variant(&spr, &all(), None).unwrap().name,
        AMX_VARIANT
    );
    let asked = choose_variant(&spr, &all(), Some("zen4"));
    assert_eq!(asked.unwrap().name, "zen4");
    // Not on an AVX-512 CPU without AMX, even when asked for.
    let zen4 = cpu(&[
        Sse42, Avx, F16c, Fma, Avx2, Bmi2, Avx512, Avx512Vbmi, Avx512Vnni, Avx512Bf16,
    ]);
    assert_eq!(choose_variant(&zen4, &all(), None).unwrap().name, "zen4");
    match choose_variant(&zen4, &all(), Some(AMX_VARIANT)) {
        Err(KernelError::Unsupported { missing, .. }) => assert!(missing.contains("AMX-INT8")),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn an_amx_library_without_the_mark_is_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir
            .path()
            .join(format!("{PREFIX}{name}{}", std::env::consts::DLL_SUFFIX));
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let mut marked = b"\x7fELF...".to_vec();
    marked.extend_from_slice(AMX_MARK);
    assert!(carries_amx_mark(&write("marked", &marked)));
    let unmarked = write(AMX_VARIANT, b"\x7fELF... glassbox: AMX tile configuration");
    assert!(!carries_amx_mark(&unmarked));
    assert!(!carries_amx_mark(&dir.path().join("missing.so")));
    // Forcing the unmarked library is an error that says why, before any load.
    let spr = cpu(&Feature::ALL);
    let err = load_from(&[dir.path().to_path_buf()], &spr, Some(AMX_VARIANT)).unwrap_err();
    assert!(matches!(err, KernelError::Excluded { .. }), "{err:?}");
    assert!(err.to_string().contains("cargo clean"), "{err}");
    // Unforced, the next best variant is the choice, and it says so.
    write("zen4", b"\x7fELF...");
    let present = variants_in(dir.path());
    assert_eq!(present.len(), 2, "{present:?}");
    let (candidates, left_out) = loadable(&present, &spr, None).unwrap();
    assert!(left_out);
    assert_eq!(
        choose_variant(&spr, &candidates, None).unwrap().name,
        "zen4"
    );
    // A marked AMX library is the choice.
    std::fs::write(&unmarked, &marked).unwrap();
    let (candidates, left_out) = loadable(&present, &spr, None).unwrap();
    assert!(!left_out);
    assert_eq!(
        choose_variant(&spr, &candidates, None).unwrap().name,
        AMX_VARIANT
    );
    // Forcing another variant never reads the AMX library.
    std::fs::write(&unmarked, b"unmarked").unwrap();
    let (candidates, left_out) = loadable(&present, &spr, Some("zen4")).unwrap();
    assert!(!left_out && candidates.len() == 2);
}

#[test]
fn each_cpu_gets_the_most_capable_variant_it_runs() {
    let cases: [(&[Feature], &str); 6] = [
        (&[], "x64"),
        (&[Sse42], "sse42"),
        (&[Sse42, Avx], "sandybridge"),
        (&[Sse42, Avx, F16c, Fma, Avx2, Bmi2], "haswell"),
        (&[Sse42, Avx, F16c, Fma, Avx2, Bmi2, AvxVnni], "alderlake"),
        (&AVX512_BASE, "skylakex"),
    ];
    for (features, want) in cases {
        let got = choose_variant(&cpu(features), &all(), None).unwrap();
        assert_eq!(got.name, want, "features {features:?}");
        assert!(got.runs_on(&cpu(features)));
    }
    // AVX2 without BMI2 (some VMs hide it): not haswell.
    let no_bmi2 = cpu(&[Sse42, Avx, F16c, Fma, Avx2]);
    assert_eq!(
        choose_variant(&no_bmi2, &all(), None).unwrap().name,
        "piledriver"
    );
}

#[test]
fn only_variants_present_are_chosen() {
    let haswell_cpu = cpu(&[Sse42, Avx, F16c, Fma, Avx2, Bmi2]);
    let some: Vec<&Variant> = X86_VARIANTS
        .iter()
        .filter(|v| ["x64", "sse42"].contains(&v.name))
        .collect();
    assert_eq!(
        choose_variant(&haswell_cpu, &some, None).unwrap().name,
        "sse42"
    );
    assert!(matches!(
        choose_variant(&haswell_cpu, &[], None),
        Err(KernelError::NoneRuns)
    ));
}

#[test]
fn a_forced_variant_must_exist_and_run_here() {
    let old = cpu(&[Sse42]);
    assert_eq!(
        choose_variant(&old, &all(), Some("x64")).unwrap().name,
        "x64"
    );
    match choose_variant(&old, &all(), Some("haswell")) {
        Err(KernelError::Unsupported { missing, .. }) => assert!(missing.contains("AVX2")),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(matches!(
        choose_variant(&old, &all(), Some("pentium")),
        Err(KernelError::UnknownVariant { .. })
    ));
}

#[test]
fn an_empty_folder_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("gb-kernels-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = load_from(std::slice::from_ref(&dir), &cpu(&[]), None).unwrap_err();
    assert_eq!(err.code(), "kernels_not_found");
    assert!(err.to_string().contains("GLASSBOX_GGML_BACKENDS"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_weight_products_follow_the_variant() {
    let choice = |uses: Vec<Feature>| KernelChoice {
        variant: "v".to_owned(),
        path: PathBuf::new(),
        uses,
        reason: String::new(),
    };
    let avx2 = vec![Sse42, Avx, F16c, Fma, Bmi2, Avx2];
    let mut amx = avx2.clone();
    amx.extend([Avx512, Avx512Vnni, AmxTile, AmxInt8]);
    assert_eq!(choice(amx).weight_products(), "ggml's AMX tiles");
    assert!(
        choice(avx2)
            .weight_products()
            .starts_with("Glassbox's eight-row kernel")
    );
    assert_eq!(
        choice(vec![Sse42, Avx]).weight_products(),
        "ggml's dot products"
    );
}
