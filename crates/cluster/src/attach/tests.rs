//! Samples written for these tests from each engine's documented metric
//! names and the exposition format (HELP/TYPE lines, labels, counters with
//! `_total`, histograms that must not be mistaken for gauges).

use super::*;

const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.4375
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12000.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 41.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 41.0
"#;

/// An older vLLM (V0): `gpu_cache_usage_perc`, two data-parallel engines.
const VLLM_OLD: &str = r#"# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="mistral"} 3.0
vllm:num_requests_running{model_name="mistral-b"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="mistral"} 0.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="mistral"} 0.25
vllm:gpu_cache_usage_perc{model_name="mistral-b"} 0.75
"#;

const SGLANG: &str = r#"# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="Qwen/Qwen2.5-7B-Instruct"} 12.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="Qwen/Qwen2.5-7B-Instruct"} 4.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="Qwen/Qwen2.5-7B-Instruct"} 0.61
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="Qwen/Qwen2.5-7B-Instruct"} 812.5
"#;

const LLAMA_CPP: &str = r#"# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 2048
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 300
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.125
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
"#;

const GLASSBOX: &str = r#"# HELP glassbox_llm_num_requests_running Requests in the local LLM's running batch.
# TYPE glassbox_llm_num_requests_running gauge
glassbox_llm_num_requests_running{model="SmolLM2-135M-Instruct.Q4_1.gguf@0123456789ab"} 3
# TYPE glassbox_llm_num_requests_waiting gauge
glassbox_llm_num_requests_waiting{model="SmolLM2-135M-Instruct.Q4_1.gguf@0123456789ab"} 0
# TYPE glassbox_llm_kv_cache_usage_perc gauge
glassbox_llm_kv_cache_usage_perc{model="SmolLM2-135M-Instruct.Q4_1.gguf@0123456789ab"} 0.1875
# TYPE glassbox_llm_generation_tokens gauge
glassbox_llm_generation_tokens{model="SmolLM2-135M-Instruct.Q4_1.gguf@0123456789ab"} 1000
# EOF
"#;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn vllm_load_and_tokens_per_second_from_the_counter() {
    let mut r = LoadReader::new(None);
    let first = r.read(VLLM, secs(10)).unwrap();
    assert_eq!(r.engine(), Some(Engine::Vllm));
    assert_eq!((first.running, first.waiting), (5, 2));
    assert_eq!(first.kv_usage, 0.4375);
    assert_eq!(first.tokens_per_second, 0.0, "one scrape gives no rate");
    let later = VLLM.replace("} 12000.0", "} 12400.0");
    let second = r.read(&later, secs(12)).unwrap();
    assert_eq!(second.tokens_per_second, 200.0);
}

#[test]
fn older_vllm_names_and_several_engines() {
    let load = LoadReader::new(None).read(VLLM_OLD, secs(0)).unwrap();
    assert_eq!((load.running, load.waiting), (4, 0), "running is summed");
    assert_eq!(load.kv_usage, 0.75, "KV usage is the fullest engine's");
}

#[test]
fn sglang_names_and_its_throughput_gauge() {
    let mut r = LoadReader::new(None);
    let load = r.read(SGLANG, secs(0)).unwrap();
    assert_eq!(r.engine(), Some(Engine::Sglang));
    assert_eq!((load.running, load.waiting), (12, 4));
    assert_eq!(load.kv_usage, 0.61);
    assert_eq!(load.tokens_per_second, 812.5);
}

#[test]
fn llama_server_names_and_a_counter_that_restarted() {
    let mut r = LoadReader::new(None);
    let load = r.read(LLAMA_CPP, secs(5)).unwrap();
    assert_eq!(r.engine(), Some(Engine::LlamaCpp));
    assert_eq!((load.running, load.waiting), (2, 1));
    assert_eq!(load.kv_usage, 0.125);
    let restarted = LLAMA_CPP.replace("tokens_predicted_total 300", "tokens_predicted_total 40");
    let load = r.read(&restarted, secs(7)).unwrap();
    assert_eq!(load.tokens_per_second, 20.0, "a reset counts from zero");
}

#[test]
fn glassbox_names() {
    let mut r = LoadReader::new(None);
    let load = r.read(GLASSBOX, secs(1)).unwrap();
    assert_eq!(r.engine(), Some(Engine::Glassbox));
    assert_eq!((load.running, load.waiting), (3, 0));
    assert_eq!(load.kv_usage, 0.1875);
    let more = GLASSBOX.replace("} 1000", "} 1500");
    assert_eq!(r.read(&more, secs(2)).unwrap().tokens_per_second, 500.0);
}

#[test]
fn a_told_engine_must_find_its_names() {
    let err = LoadReader::new(Some(Engine::Sglang))
        .read(VLLM, secs(0))
        .unwrap_err();
    assert_eq!(
        err,
        MetricsError::Missing {
            engine: "sglang",
            name: "sglang:num_running_reqs".into()
        }
    );
    let err = LoadReader::new(None)
        .read("process_cpu_seconds_total 1.5\n", secs(0))
        .unwrap_err();
    assert_eq!(err, MetricsError::UnknownEngine);
    assert!(err.to_string().contains("--metrics"));
}

#[test]
fn engine_names_round_trip() {
    for e in Engine::ALL {
        assert_eq!(Engine::from_name(e.name()), Some(e));
    }
    assert_eq!(Engine::from_name("llama-server"), Some(Engine::LlamaCpp));
    assert_eq!(Engine::from_name("tgi"), None);
}

#[test]
fn labels_with_escapes_timestamps_and_exemplars() {
    let text = "a_b:c{path=\"C:\\\\x\",msg=\"say \\\"hi\\\"\\nbye\", le = \"+Inf\" ,} 7 1700000000000\n\
                requests_total{code=\"200\"} 3 # {trace_id=\"abc\"} 1.0\n\
                up NaN\n";
    let s = parse(text).unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].name, "a_b:c");
    assert_eq!(
        s[0].labels,
        vec![
            ("path".to_owned(), "C:\\x".to_owned()),
            ("msg".to_owned(), "say \"hi\"\nbye".to_owned()),
            ("le".to_owned(), "+Inf".to_owned()),
        ]
    );
    assert_eq!(s[0].value, 7.0);
    assert_eq!(s[1].value, 3.0);
    assert!(s[2].value.is_nan());
}

#[test]
fn bad_lines_are_named_by_number() {
    for (text, reason) in [
        (
            "ok 1\n{x=\"1\"} 2\n",
            "it does not start with a metric name",
        ),
        ("ok 1\nm{x=\"1\" 2\n", "labels are not separated by `,`"),
        ("ok 1\nm{x=1} 2\n", "a label value is not quoted"),
        ("ok 1\nm{x=\"1} 2\n", "a label value is not closed"),
        ("ok 1\nm twelve\n", "its value is not a number"),
        ("ok 1\nm\n", "it has no value"),
        (
            "ok 1\nm 1 2 3\n",
            "it has text after the value and timestamp",
        ),
    ] {
        match parse(text) {
            Err(MetricsError::Syntax {
                line, reason: r, ..
            }) => {
                assert_eq!((line, r), (2, reason), "{text:?}");
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}
