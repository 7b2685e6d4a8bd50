//! The sealed holdout files shipped with the planner (`data/sealed/*.csv`,
//! [`crate::sealed`]) and the engine families each has rows of, so that a
//! plan can put beside its band the first scores of the sealed files that
//! hold its own engine ([`crate::sealed::SealedLog::blind_for`]).
//!
//! A new sealed file is added to [`FILES`] when it is committed; the test
//! `every_sealed_file_is_listed` fails until it is.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use crate::measurements::{Measurement, parse_csv};

/// (file name, contents) of every sealed file.
const FILES: &[(&str, &str)] = &[
    (
        "2026-12-03-gpt-fast-lmdeploy.csv",
        include_str!("../data/sealed/2026-12-03-gpt-fast-lmdeploy.csv"),
    ),
    (
        "2026-12-03-jan-trtllm-llamacpp.csv",
        include_str!("../data/sealed/2026-12-03-jan-trtllm-llamacpp.csv"),
    ),
    (
        "2026-12-03-premai-nim-llmbench.csv",
        include_str!("../data/sealed/2026-12-03-premai-nim-llmbench.csv"),
    ),
    (
        "2026-12-04-autoawq-torchao.csv",
        include_str!("../data/sealed/2026-12-04-autoawq-torchao.csv"),
    ),
    (
        "2026-12-04-hf-eager-mlc-tp.csv",
        include_str!("../data/sealed/2026-12-04-hf-eager-mlc-tp.csv"),
    ),
    (
        "2026-12-04-llamabench-community.csv",
        include_str!("../data/sealed/2026-12-04-llamabench-community.csv"),
    ),
    (
        "2026-12-04-mi300x-vllm-oci-amd.csv",
        include_str!("../data/sealed/2026-12-04-mi300x-vllm-oci-amd.csv"),
    ),
    (
        "2026-12-04-nemo-trtllm-llama2.csv",
        include_str!("../data/sealed/2026-12-04-nemo-trtllm-llama2.csv"),
    ),
    (
        "2026-12-04-rocm-vllm-dev-docker.csv",
        include_str!("../data/sealed/2026-12-04-rocm-vllm-dev-docker.csv"),
    ),
    (
        "2026-12-04-vllm-ci-latency.csv",
        include_str!("../data/sealed/2026-12-04-vllm-ci-latency.csv"),
    ),
    (
        "2026-12-05-dstack-mi300x-h100-h200.csv",
        include_str!("../data/sealed/2026-12-05-dstack-mi300x-h100-h200.csv"),
    ),
    (
        "2026-12-05-gemma3-llama4-gptoss20b.csv",
        include_str!("../data/sealed/2026-12-05-gemma3-llama4-gptoss20b.csv"),
    ),
    (
        "2026-12-05-gpt-oss-gemma3-llama4.csv",
        include_str!("../data/sealed/2026-12-05-gpt-oss-gemma3-llama4.csv"),
    ),
    (
        "2026-12-05-inferencex-dsr1-h200.csv",
        include_str!("../data/sealed/2026-12-05-inferencex-dsr1-h200.csv"),
    ),
    (
        "2026-12-05-inferencex-gptoss-run-rest.csv",
        include_str!("../data/sealed/2026-12-05-inferencex-gptoss-run-rest.csv"),
    ),
    (
        "2026-12-05-moe-small-batch.csv",
        include_str!("../data/sealed/2026-12-05-moe-small-batch.csv"),
    ),
    (
        "2026-12-05-moe-vllm-sglang.csv",
        include_str!("../data/sealed/2026-12-05-moe-vllm-sglang.csv"),
    ),
    (
        "2026-12-05-vllm-prs-tp.csv",
        include_str!("../data/sealed/2026-12-05-vllm-prs-tp.csv"),
    ),
    (
        "2026-12-06-anl-inference-bench.csv",
        include_str!("../data/sealed/2026-12-06-anl-inference-bench.csv"),
    ),
    (
        "2026-12-06-databasemart-a40-a6000-vllm.csv",
        include_str!("../data/sealed/2026-12-06-databasemart-a40-a6000-vllm.csv"),
    ),
    (
        "2026-12-06-exllamav2-ollama.csv",
        include_str!("../data/sealed/2026-12-06-exllamav2-ollama.csv"),
    ),
    (
        "2026-12-06-modal-l4-inference-bench.csv",
        include_str!("../data/sealed/2026-12-06-modal-l4-inference-bench.csv"),
    ),
    (
        "2026-12-06-rocm-llamacpp-sglang-a30.csv",
        include_str!("../data/sealed/2026-12-06-rocm-llamacpp-sglang-a30.csv"),
    ),
    (
        "2026-12-06-tgi-mlc-sglang.csv",
        include_str!("../data/sealed/2026-12-06-tgi-mlc-sglang.csv"),
    ),
    (
        "2026-12-06-torchao-gptfast-unseen.csv",
        include_str!("../data/sealed/2026-12-06-torchao-gptfast-unseen.csv"),
    ),
    (
        "2026-12-07-2x3090-vllm-qwen3moe-fp8.csv",
        include_str!("../data/sealed/2026-12-07-2x3090-vllm-qwen3moe-fp8.csv"),
    ),
    (
        "2026-12-07-a100-vllm-qwen3-8b.csv",
        include_str!("../data/sealed/2026-12-07-a100-vllm-qwen3-8b.csv"),
    ),
    (
        "2026-12-07-ac-vllm-pr23197-rtn-baseline.csv",
        include_str!("../data/sealed/2026-12-07-ac-vllm-pr23197-rtn-baseline.csv"),
    ),
    (
        "2026-12-07-af-dambergn-4060ti-ollama.csv",
        include_str!("../data/sealed/2026-12-07-af-dambergn-4060ti-ollama.csv"),
    ),
    (
        "2026-12-07-ah-qwen-quantization-a100-sglang.csv",
        include_str!("../data/sealed/2026-12-07-ah-qwen-quantization-a100-sglang.csv"),
    ),
    (
        "2026-12-07-am-tanjunchen-h20-sglang-dsr1.csv",
        include_str!("../data/sealed/2026-12-07-am-tanjunchen-h20-sglang-dsr1.csv"),
    ),
    (
        "2026-12-07-an-optimum-benchmark-llama2-a100.csv",
        include_str!("../data/sealed/2026-12-07-an-optimum-benchmark-llama2-a100.csv"),
    ),
    (
        "2026-12-07-ao-ik-llamacpp-mainline.csv",
        include_str!("../data/sealed/2026-12-07-ao-ik-llamacpp-mainline.csv"),
    ),
    (
        "2026-12-07-ap-optimum-gptq-llama2-13b-a100.csv",
        include_str!("../data/sealed/2026-12-07-ap-optimum-gptq-llama2-13b-a100.csv"),
    ),
    (
        "2026-12-07-aq-zjuici-a100-40g-vllm025-mistral7b.csv",
        include_str!("../data/sealed/2026-12-07-aq-zjuici-a100-40g-vllm025-mistral7b.csv"),
    ),
    (
        "2026-12-07-ar-trtllm-latency-qwen25-05b.csv",
        include_str!("../data/sealed/2026-12-07-ar-trtllm-latency-qwen25-05b.csv"),
    ),
    (
        "2026-12-07-as-vllm-ascend-910b3-pr-reports.csv",
        include_str!("../data/sealed/2026-12-07-as-vllm-ascend-910b3-pr-reports.csv"),
    ),
    (
        "2026-12-07-au-florent-rtx3090fe-vllm.csv",
        include_str!("../data/sealed/2026-12-07-au-florent-rtx3090fe-vllm.csv"),
    ),
    (
        "2026-12-07-av-ggml-ci-v100pcie-llamacpp.csv",
        include_str!("../data/sealed/2026-12-07-av-ggml-ci-v100pcie-llamacpp.csv"),
    ),
    (
        "2026-12-07-aw-massedcompute-tgi-llama3-70b.csv",
        include_str!("../data/sealed/2026-12-07-aw-massedcompute-tgi-llama3-70b.csv"),
    ),
    (
        "2026-12-07-ax-quick-awq-fp16-baselines.csv",
        include_str!("../data/sealed/2026-12-07-ax-quick-awq-fp16-baselines.csv"),
    ),
    (
        "2026-12-07-ay-runpod-h100-vllm-qwen3-8b.csv",
        include_str!("../data/sealed/2026-12-07-ay-runpod-h100-vllm-qwen3-8b.csv"),
    ),
    (
        "2026-12-07-az-alexziskind-m4max-llamabench.csv",
        include_str!("../data/sealed/2026-12-07-az-alexziskind-m4max-llamabench.csv"),
    ),
    (
        "2026-12-07-ba-hkadm-ollama-gpu-test.csv",
        include_str!("../data/sealed/2026-12-07-ba-hkadm-ollama-gpu-test.csv"),
    ),
    (
        "2026-12-07-bb-llm-tracker-vault-exl2-sglang.csv",
        include_str!("../data/sealed/2026-12-07-bb-llm-tracker-vault-exl2-sglang.csv"),
    ),
    (
        "2026-12-07-bc-tokenomics-h100-vllm-llama.csv",
        include_str!("../data/sealed/2026-12-07-bc-tokenomics-h100-vllm-llama.csv"),
    ),
    (
        "2026-12-07-bd-server-gear-h100nvl-vllm.csv",
        include_str!("../data/sealed/2026-12-07-bd-server-gear-h100nvl-vllm.csv"),
    ),
    (
        "2026-12-07-be-ninehills-4090-qwen3-4b-quant.csv",
        include_str!("../data/sealed/2026-12-07-be-ninehills-4090-qwen3-4b-quant.csv"),
    ),
    (
        "2026-12-07-bf-azir-5070ti-trtllm-vllm.csv",
        include_str!("../data/sealed/2026-12-07-bf-azir-5070ti-trtllm-vllm.csv"),
    ),
    (
        "2026-12-07-bg-wmx-gke-l4-vllm-qwen05b.csv",
        include_str!("../data/sealed/2026-12-07-bg-wmx-gke-l4-vllm-qwen05b.csv"),
    ),
    (
        "2026-12-07-bh-btbtyler09-mi100-vllm.csv",
        include_str!("../data/sealed/2026-12-07-bh-btbtyler09-mi100-vllm.csv"),
    ),
    (
        "2026-12-07-bi-derekliu35-hf-quant.csv",
        include_str!("../data/sealed/2026-12-07-bi-derekliu35-hf-quant.csv"),
    ),
    (
        "2026-12-07-bj-hathora-h100pcie-vllm.csv",
        include_str!("../data/sealed/2026-12-07-bj-hathora-h100pcie-vllm.csv"),
    ),
    (
        "2026-12-07-bl-xianghaokong-a100pcie-vllm-sglang.csv",
        include_str!("../data/sealed/2026-12-07-bl-xianghaokong-a100pcie-vllm-sglang.csv"),
    ),
    (
        "2026-12-07-bo-llamacpp-pr4812-3090ti.csv",
        include_str!("../data/sealed/2026-12-07-bo-llamacpp-pr4812-3090ti.csv"),
    ),
    (
        "2026-12-07-bp-vllm-issue4702-a6000.csv",
        include_str!("../data/sealed/2026-12-07-bp-vllm-issue4702-a6000.csv"),
    ),
    (
        "2026-12-07-bt-clark-l4-triton-trtllm.csv",
        include_str!("../data/sealed/2026-12-07-bt-clark-l4-triton-trtllm.csv"),
    ),
    (
        "2026-12-07-bu-cloudrift-deplodock-vllm-sglang.csv",
        include_str!("../data/sealed/2026-12-07-bu-cloudrift-deplodock-vllm-sglang.csv"),
    ),
    (
        "2026-12-07-bv-chirawatch-h100pcie-vllm-sglang.csv",
        include_str!("../data/sealed/2026-12-07-bv-chirawatch-h100pcie-vllm-sglang.csv"),
    ),
    (
        "2026-12-07-bw-bowenwan6-h200-sglang-vllm.csv",
        include_str!("../data/sealed/2026-12-07-bw-bowenwan6-h200-sglang-vllm.csv"),
    ),
    (
        "2026-12-07-by-llamacpp-pr16884-4090.csv",
        include_str!("../data/sealed/2026-12-07-by-llamacpp-pr16884-4090.csv"),
    ),
    (
        "2026-12-07-c-meluxina-a100-vllm-sglang-qwen25.csv",
        include_str!("../data/sealed/2026-12-07-c-meluxina-a100-vllm-sglang-qwen25.csv"),
    ),
    (
        "2026-12-07-ca-bereket-l4-vllm-mistral7b-awq.csv",
        include_str!("../data/sealed/2026-12-07-ca-bereket-l4-vllm-mistral7b-awq.csv"),
    ),
    (
        "2026-12-07-cb-awsome-nim-h100-llama31-70b.csv",
        include_str!("../data/sealed/2026-12-07-cb-awsome-nim-h100-llama31-70b.csv"),
    ),
    (
        "2026-12-07-cc-yhavinga-3090-vllm-gemma3.csv",
        include_str!("../data/sealed/2026-12-07-cc-yhavinga-3090-vllm-gemma3.csv"),
    ),
    (
        "2026-12-07-cd-azure-ndmi300x-vllm-llama31-fp8.csv",
        include_str!("../data/sealed/2026-12-07-cd-azure-ndmi300x-vllm-llama31-fp8.csv"),
    ),
    (
        "2026-12-07-ce-vllm-pr53060-h100pcie-fa3-decode.csv",
        include_str!("../data/sealed/2026-12-07-ce-vllm-pr53060-h100pcie-fa3-decode.csv"),
    ),
    (
        "2026-12-07-cf-kekzl-imp-5090-llamacpp.csv",
        include_str!("../data/sealed/2026-12-07-cf-kekzl-imp-5090-llamacpp.csv"),
    ),
    (
        "2026-12-07-cg-datacrunch-h200-sglang-deepseek-bs1.csv",
        include_str!("../data/sealed/2026-12-07-cg-datacrunch-h200-sglang-deepseek-bs1.csv"),
    ),
    (
        "2026-12-07-ck-ravichrn-a10-llama8b-hf-vllm.csv",
        include_str!("../data/sealed/2026-12-07-ck-ravichrn-a10-llama8b-hf-vllm.csv"),
    ),
    (
        "2026-12-07-cm-yeswearecoding-3060-llamabench.csv",
        include_str!("../data/sealed/2026-12-07-cm-yeswearecoding-3060-llamabench.csv"),
    ),
    (
        "2026-12-07-co-evalscope-h20-gptoss-a100-qwq.csv",
        include_str!("../data/sealed/2026-12-07-co-evalscope-h20-gptoss-a100-qwq.csv"),
    ),
    (
        "2026-12-07-consumer-blackwell-vllm-aiperf.csv",
        include_str!("../data/sealed/2026-12-07-consumer-blackwell-vllm-aiperf.csv"),
    ),
    (
        "2026-12-07-cp-bnb-benchmarking-t4-4090-h100.csv",
        include_str!("../data/sealed/2026-12-07-cp-bnb-benchmarking-t4-4090-h100.csv"),
    ),
    (
        "2026-12-07-cq-sglang-cookbook-b200-qwen3-235b.csv",
        include_str!("../data/sealed/2026-12-07-cq-sglang-cookbook-b200-qwen3-235b.csv"),
    ),
    (
        "2026-12-07-cr-gpu-recipes-a3ultra-h200-trtllm-405b.csv",
        include_str!("../data/sealed/2026-12-07-cr-gpu-recipes-a3ultra-h200-trtllm-405b.csv"),
    ),
    (
        "2026-12-07-ct-sparecores-cloud-llamabench.csv",
        include_str!("../data/sealed/2026-12-07-ct-sparecores-cloud-llamabench.csv"),
    ),
    (
        "2026-12-07-cu-riken-gh200-llamabench.csv",
        include_str!("../data/sealed/2026-12-07-cu-riken-gh200-llamabench.csv"),
    ),
    (
        "2026-12-07-cv-sprint-paris-mi300x-mixtral-fp8.csv",
        include_str!("../data/sealed/2026-12-07-cv-sprint-paris-mi300x-mixtral-fp8.csv"),
    ),
    (
        "2026-12-07-cx-inferenceos-3090-vllm-qwen25-7b.csv",
        include_str!("../data/sealed/2026-12-07-cx-inferenceos-3090-vllm-qwen25-7b.csv"),
    ),
    (
        "2026-12-07-da-phi3-mini-card-a100-hf-llamacpp.csv",
        include_str!("../data/sealed/2026-12-07-da-phi3-mini-card-a100-hf-llamacpp.csv"),
    ),
    (
        "2026-12-07-datacenter-serving.csv",
        include_str!("../data/sealed/2026-12-07-datacenter-serving.csv"),
    ),
    (
        "2026-12-07-dd-zerohost-t4-vllm-qwen25-7b-awq.csv",
        include_str!("../data/sealed/2026-12-07-dd-zerohost-t4-vllm-qwen25-7b-awq.csv"),
    ),
    (
        "2026-12-07-de-varadmore-a10g-sglang-vllm-decode.csv",
        include_str!("../data/sealed/2026-12-07-de-varadmore-a10g-sglang-vllm-decode.csv"),
    ),
    (
        "2026-12-07-dg-gwenland-t4-llamacpp-qwen25-7b.csv",
        include_str!("../data/sealed/2026-12-07-dg-gwenland-t4-llamacpp-qwen25-7b.csv"),
    ),
    (
        "2026-12-07-dh-litellama-a10-hf-qwen25.csv",
        include_str!("../data/sealed/2026-12-07-dh-litellama-a10-hf-qwen25.csv"),
    ),
    (
        "2026-12-07-dk-modelopt-h200-trtllm-llama31.csv",
        include_str!("../data/sealed/2026-12-07-dk-modelopt-h200-trtllm-llama31.csv"),
    ),
    (
        "2026-12-07-dm-luckynwa-4080-3080-llamabench.csv",
        include_str!("../data/sealed/2026-12-07-dm-luckynwa-4080-3080-llamabench.csv"),
    ),
    (
        "2026-12-07-dp-stefanthoss-a4000-a5000-t4-ollama.csv",
        include_str!("../data/sealed/2026-12-07-dp-stefanthoss-a4000-a5000-t4-ollama.csv"),
    ),
    (
        "2026-12-07-dr-augmxnt-speedbench-pro6000-3090.csv",
        include_str!("../data/sealed/2026-12-07-dr-augmxnt-speedbench-pro6000-3090.csv"),
    ),
    (
        "2026-12-07-e-jordannanos-h100-vllm-llama33-70b.csv",
        include_str!("../data/sealed/2026-12-07-e-jordannanos-h100-vllm-llama33-70b.csv"),
    ),
    (
        "2026-12-07-f-augmxnt-mi300-testing.csv",
        include_str!("../data/sealed/2026-12-07-f-augmxnt-mi300-testing.csv"),
    ),
    (
        "2026-12-07-g-anyscale-ray-serve-vllm-gptoss-h100.csv",
        include_str!("../data/sealed/2026-12-07-g-anyscale-ray-serve-vllm-gptoss-h100.csv"),
    ),
    (
        "2026-12-07-h-ollama-rtx4070-agentic.csv",
        include_str!("../data/sealed/2026-12-07-h-ollama-rtx4070-agentic.csv"),
    ),
    (
        "2026-12-07-i-france-travail-vllm-a100.csv",
        include_str!("../data/sealed/2026-12-07-i-france-travail-vllm-a100.csv"),
    ),
    (
        "2026-12-07-j-h100-trtllm-vs-vllm-serving.csv",
        include_str!("../data/sealed/2026-12-07-j-h100-trtllm-vs-vllm-serving.csv"),
    ),
    (
        "2026-12-07-k-accelmark-vllm-datacenter.csv",
        include_str!("../data/sealed/2026-12-07-k-accelmark-vllm-datacenter.csv"),
    ),
    (
        "2026-12-07-l4-vllm-qwen15b-prefill-batch.csv",
        include_str!("../data/sealed/2026-12-07-l4-vllm-qwen15b-prefill-batch.csv"),
    ),
    (
        "2026-12-07-llamabench-3080-m4-m1max.csv",
        include_str!("../data/sealed/2026-12-07-llamabench-3080-m4-m1max.csv"),
    ),
    (
        "2026-12-07-llamacpp-moe.csv",
        include_str!("../data/sealed/2026-12-07-llamacpp-moe.csv"),
    ),
    (
        "2026-12-07-m-mi210-llamacpp-qwen3-4b.csv",
        include_str!("../data/sealed/2026-12-07-m-mi210-llamacpp-qwen3-4b.csv"),
    ),
    (
        "2026-12-07-macllmbench-m1-m2max.csv",
        include_str!("../data/sealed/2026-12-07-macllmbench-m1-m2max.csv"),
    ),
    (
        "2026-12-07-mi300x-vllm-latency-llama8b.csv",
        include_str!("../data/sealed/2026-12-07-mi300x-vllm-latency-llama8b.csv"),
    ),
    (
        "2026-12-07-n-wangjunjian-t4-vllm-qwen3-4b.csv",
        include_str!("../data/sealed/2026-12-07-n-wangjunjian-t4-vllm-qwen3-4b.csv"),
    ),
    (
        "2026-12-07-s-akabane-t4-a100-vllm.csv",
        include_str!("../data/sealed/2026-12-07-s-akabane-t4-a100-vllm.csv"),
    ),
    (
        "2026-12-07-serving-results.csv",
        include_str!("../data/sealed/2026-12-07-serving-results.csv"),
    ),
    (
        "2026-12-07-t-youwins-l4-vllm-qwen25-7b-quant.csv",
        include_str!("../data/sealed/2026-12-07-t-youwins-l4-vllm-qwen25-7b-quant.csv"),
    ),
    (
        "2026-12-07-t4-vllm-offline-qwen15b.csv",
        include_str!("../data/sealed/2026-12-07-t4-vllm-offline-qwen15b.csv"),
    ),
    (
        "2026-12-07-t4-vllm-qwen15b.csv",
        include_str!("../data/sealed/2026-12-07-t4-vllm-qwen15b.csv"),
    ),
    (
        "2026-12-07-u-llamacpp-4167-apple-m-series.csv",
        include_str!("../data/sealed/2026-12-07-u-llamacpp-4167-apple-m-series.csv"),
    ),
    (
        "2026-12-07-w-localscore-testdb-3090-4060ti.csv",
        include_str!("../data/sealed/2026-12-07-w-localscore-testdb-3090-4060ti.csv"),
    ),
    (
        "2026-12-07-y-r1-benchmark-h200.csv",
        include_str!("../data/sealed/2026-12-07-y-r1-benchmark-h200.csv"),
    ),
    (
        "2026-12-08-a-llamacpp-cuda-scoreboard-15013.csv",
        include_str!("../data/sealed/2026-12-08-a-llamacpp-cuda-scoreboard-15013.csv"),
    ),
    (
        "2026-12-08-e-vuuihc-h20-sglang-qwen3-8b.csv",
        include_str!("../data/sealed/2026-12-08-e-vuuihc-h20-sglang-qwen3-8b.csv"),
    ),
    (
        "2026-12-08-j-redhat-r1-llama70b-card.csv",
        include_str!("../data/sealed/2026-12-08-j-redhat-r1-llama70b-card.csv"),
    ),
    (
        "2026-12-08-k-redhat-r1-qwen7b-card.csv",
        include_str!("../data/sealed/2026-12-08-k-redhat-r1-qwen7b-card.csv"),
    ),
];

/// Every row of the shipped sealed files, parsed once (a plan reads those
/// on its GPU, [`crate::sealed_gpu`]). The test `every_sealed_file_is_listed`
/// requires every file to parse.
pub fn rows() -> &'static [Measurement] {
    static ROWS: OnceLock<Vec<Measurement>> = OnceLock::new();
    ROWS.get_or_init(|| {
        FILES
            .iter()
            .filter_map(|(name, text)| parse_csv(text, name).ok())
            .flatten()
            .collect()
    })
}

/// The (metric, engine family) pairs of each shipped file, parsed once (a
/// plan asks for every file on each of its figures).
fn pairs() -> &'static BTreeMap<&'static str, BTreeSet<(String, String)>> {
    static PAIRS: OnceLock<BTreeMap<&'static str, BTreeSet<(String, String)>>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        FILES
            .iter()
            .filter_map(|(name, text)| {
                let rows = parse_csv(text, name).ok()?;
                let set = rows
                    .iter()
                    .map(|r| {
                        (
                            r.metric.as_str().to_string(),
                            r.engine.family().as_str().to_string(),
                        )
                    })
                    .collect();
                Some((*name, set))
            })
            .collect()
    })
}

/// The (metric, engine family) pairs of the sealed file named `file` (a
/// path or a bare name; only its last component counts). Empty for a file
/// not shipped, or one that does not parse.
pub fn engines_of(file: &str) -> &'static BTreeSet<(String, String)> {
    static NONE: BTreeSet<(String, String)> = BTreeSet::new();
    let name = Path::new(file)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(file);
    pairs().get(name).unwrap_or(&NONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sealed_file_is_listed() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/sealed");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".csv"))
            .collect();
        on_disk.sort();
        let listed: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(listed, on_disk, "add the new sealed file to FILES");
        for (name, text) in FILES {
            assert!(parse_csv(text, name).is_ok(), "{name} does not parse");
        }
    }

    #[test]
    fn a_file_names_the_engine_families_of_its_rows() {
        let e = engines_of("crates/planner/data/sealed/2026-12-06-exllamav2-ollama.csv");
        // Versioned names (`exllamav2@0.0.6`) fold into their family;
        // Ollama runs llama.cpp's kernels, so its family is llama.cpp's.
        assert!(e.contains(&("decode_tok_s".into(), "exllamav2".into())));
        assert!(e.contains(&("prefill_tok_s".into(), "exllamav2".into())));
        assert!(e.contains(&("decode_tok_s".into(), "llama.cpp".into())));
        assert!(!e.iter().any(|(_, f)| f == "vllm"));
        assert!(engines_of("no-such-file.csv").is_empty());
    }

    #[test]
    fn a_plans_engine_reads_the_first_scores_of_the_files_holding_it() {
        let log = crate::sealed::SealedLog::shipped().unwrap();
        let all = log.blind("decode_tok_s").unwrap();
        let own = log.blind_for("decode_tok_s", "exllamav2").unwrap();
        // One file has ExLlamaV2 rows: its decode first score, not the median
        // over every file.
        let file = log
            .score
            .iter()
            .find(|f| f.file.ends_with("2026-12-06-exllamav2-ollama.csv"))
            .unwrap();
        let decode = file
            .metric
            .iter()
            .find(|m| m.name == "decode_tok_s")
            .unwrap();
        assert_eq!((own.files, own.rows), (1, decode.rows));
        assert_eq!(own.typical_pct, decode.planner_pct);
        // Which way it missed is that file's own median ratio.
        assert_eq!(own.typical_ratio, Some(decode.median_ratio));
        assert_eq!(own.engine.as_deref(), Some("exllamav2"));
        assert!(all.files > own.files && all.engine.is_none());
        // No sealed file has rows of the metric from the engine: no figure of
        // its own.
        assert!(log.blind_for("ttft_ms", "exllamav2").is_none());
    }
}
