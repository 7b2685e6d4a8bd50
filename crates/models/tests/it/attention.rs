//! Attention for a few query rows: the kernel Glassbox builds into every CPU
//! variant of ggml (`crates/models/kernels/flash-attn-rows.cpp`,
//! docs/adr/0004-cpu-kernels.md, "Attention for a few query rows").

use glassbox_models::{ChatMessage, GenerateRequest, LlmHandle, LlmOptions};

use crate::common::models;

/// Every CPU variant library of this build carries the kernel: a build of
/// llama.cpp without the CMake hook (or a stale one) fails here rather than
/// running ggml's slower kernel unnoticed.
#[test]
#[cfg(target_arch = "x86_64")]
fn every_cpu_variant_carries_the_few_rows_attention_kernel() {
    crate::common::assert_every_cpu_variant_carries(
        glassbox_models::cpu::FLASH_ATTN_ROWS_MARK,
        "flash-attn-rows.cpp",
    );
}

fn passage_request(passage: &str, question: &str) -> GenerateRequest {
    GenerateRequest {
        max_tokens: 24,
        temperature: 0.0,
        ..GenerateRequest::chat(vec![
            ChatMessage::system("Answer using only the passage. Quote it exactly."),
            ChatMessage::user(format!("Passage: {passage}\nQuestion: {question}")),
        ])
    }
}

/// The greedy answers of `requests`, sent together to one fresh handle.
fn answers(
    flash_attention: bool,
    kv_cache_cells: Option<u32>,
    requests: &[GenerateRequest],
) -> Vec<(String, u32)> {
    let options = LlmOptions {
        threads: Some(2),
        n_ctx: 1024,
        max_num_seqs: requests.len() as u32,
        kv_cache_cells,
        flash_attention,
        ..LlmOptions::new(glassbox_models::smollm2_path(&models()))
    };
    let h = LlmHandle::load(options).expect("loading SmolLM2");
    let running: Vec<_> = requests
        .iter()
        .map(|r| {
            let (h, r) = (h.clone(), r.clone());
            std::thread::spawn(move || h.generate_blocking(r).expect("generation"))
        })
        .collect();
    running
        .into_iter()
        .map(|t| {
            let c = t.join().expect("generation thread");
            (c.text, c.usage.prompt_tokens)
        })
        .collect()
}

fn first_words(text: &str, n: usize) -> Vec<&str> {
    text.split_whitespace().take(n).collect()
}

/// The kernel against an independent computation of the same attention:
/// llama.cpp without flash attention (matrix products and a softmax). The
/// two round differently, so texts are compared by their first words, on
/// answers that quote their passage; a wrong mask, head mapping or merge of
/// partial sums gives another answer from the first token. Covers the
/// kernel's two paths: one query row over 512+ cells (split over the
/// threads) and several rows over a shared, masked cache.
#[test]
fn few_row_attention_gives_the_answers_of_the_matrix_path() {
    let pro = "The Glassbox Pro plan costs $129 per month and includes priority support, \
               single sign-on and a 99.9% uptime guarantee. ";
    let long = vec![passage_request(
        &format!("{}The Team plan costs $49 per month.", pro.repeat(17)),
        "What does the Team plan cost?",
    )];
    let (ours, reference) = (answers(true, None, &long), answers(false, None, &long));
    assert!(ours[0].1 > 600, "the long prompt has {} tokens", ours[0].1);
    assert!(!ours[0].0.trim().is_empty(), "empty answer");
    assert_eq!(
        first_words(&ours[0].0, 5),
        first_words(&reference[0].0, 5),
        "one row over {} cells:\n  kernel: {}\n  matrix: {}",
        ours[0].1,
        ours[0].0,
        reference[0].0
    );

    let together = vec![
        passage_request(pro, "What does the Pro plan cost?"),
        passage_request(
            "Returns are accepted within 30 days of delivery with the original receipt.",
            "How long do I have to return an item?",
        ),
        passage_request(
            "The kettle's E3 error means the water tank is empty; refill it and restart.",
            "What does error E3 mean?",
        ),
    ];
    // One pool of cells for the three: one KV stream, each row masked to
    // its own sequence's cells.
    let pooled = Some(1536);
    let (ours, reference) = (
        answers(true, pooled, &together),
        answers(false, pooled, &together),
    );
    for ((a, _), (b, _)) in ours.iter().zip(&reference) {
        assert!(!a.trim().is_empty(), "empty answer");
        assert_eq!(
            first_words(a, 5),
            first_words(b, 5),
            "rows together:\n  kernel: {a}\n  matrix: {b}"
        );
    }
}

/// One flash-attention op on ggml's CPU backend (whatever variant this CPU
/// loads) against a plain reference, over the options the kernel carries:
/// grouped-query heads, masks with −∞ cells, ALiBi slopes, soft-capping,
/// sinks, key and value widths that differ or are not a multiple of the
/// vector width, one row over 512+ cells (cells split over the threads) and
/// several rows (rows split), and 64 rows (ggml's tiled kernel, handed on).
#[allow(unsafe_code)]
mod against_a_reference {
    use llama_cpp_sys_2 as sys;

    use crate::common::Rng;
    use crate::common::cpu_op::{self, Input};

    #[derive(Debug, Clone, Copy)]
    struct Case {
        dk: i64,
        dv: i64,
        rows: i64,
        heads: i64,
        kv_heads: i64,
        cells: i64,
        max_bias: f32,
        softcap: f32,
        sinks: bool,
        /// Sequences sharing the cache, as in one KV stream: cells go to
        /// them in turns of 96, the first `rows / seqs` rows to the first.
        seqs: i64,
    }

    fn to_f16(values: &[f32]) -> (Vec<u16>, Vec<f32>) {
        let mut half = vec![0u16; values.len()];
        let mut back = vec![0f32; values.len()];
        // SAFETY: both buffers hold `values.len()` elements.
        unsafe {
            sys::ggml_fp32_to_fp16_row(values.as_ptr(), half.as_mut_ptr(), values.len() as i64);
            sys::ggml_fp16_to_fp32_row(half.as_ptr(), back.as_mut_ptr(), values.len() as i64);
        }
        (half, back)
    }

    /// ggml's result, [dv, heads, rows] (dv fastest).
    fn ggml(c: Case, q: &[f32], k: &[u16], v: &[u16], mask: &[u16], sinks: &[f32]) -> Vec<f32> {
        // SAFETY: every tensor is made in the context `run` gives, with the
        // shape its data was generated for.
        let (result, ()) = unsafe {
            cpu_op::run(
                16,
                false,
                |ctx| {
                    let tq =
                        sys::ggml_new_tensor_4d(ctx, sys::GGML_TYPE_F32, c.dk, c.rows, c.heads, 1);
                    let tk = sys::ggml_new_tensor_4d(
                        ctx,
                        sys::GGML_TYPE_F16,
                        c.dk,
                        c.cells,
                        c.kv_heads,
                        1,
                    );
                    let tv = sys::ggml_new_tensor_4d(
                        ctx,
                        sys::GGML_TYPE_F16,
                        c.dv,
                        c.cells,
                        c.kv_heads,
                        1,
                    );
                    let tm =
                        sys::ggml_new_tensor_4d(ctx, sys::GGML_TYPE_F16, c.cells, c.rows, 1, 1);
                    let scale = 1.0 / (c.dk as f32).sqrt();
                    let out =
                        sys::ggml_flash_attn_ext(ctx, tq, tk, tv, tm, scale, c.max_bias, c.softcap);
                    let mut inputs = vec![
                        Input::new(tq, q),
                        Input::new(tk, k),
                        Input::new(tv, v),
                        Input::new(tm, mask),
                    ];
                    if c.sinks {
                        let ts = sys::ggml_new_tensor_1d(ctx, sys::GGML_TYPE_F32, c.heads);
                        sys::ggml_flash_attn_ext_add_sinks(out, ts);
                        inputs.push(Input::new(ts, sinks));
                    }
                    (out, inputs)
                },
                |_| (),
            )
        };
        assert_eq!(result.len(), (c.dv * c.heads * c.rows) as usize);
        result
    }

    /// The same attention in f64, from the F16-rounded keys and values.
    fn reference(
        c: Case,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        mask: &[f32],
        sinks: &[f32],
    ) -> Vec<f32> {
        let scale = 1.0 / (c.dk as f64).sqrt();
        let n_head_log2 = 1i64 << (c.heads as f64).log2().floor() as u32;
        let m0 = 2f64.powf(-f64::from(c.max_bias) / n_head_log2 as f64);
        let m1 = 2f64.powf(-(f64::from(c.max_bias) / 2.0) / n_head_log2 as f64);
        let mut out = vec![0f32; (c.dv * c.heads * c.rows) as usize];
        for r in 0..c.rows {
            for h in 0..c.heads {
                let slope = if c.max_bias > 0.0 {
                    if h < n_head_log2 {
                        m0.powi(h as i32 + 1)
                    } else {
                        m1.powi((2 * (h - n_head_log2) + 1) as i32)
                    }
                } else {
                    1.0
                };
                let kh = h / (c.heads / c.kv_heads);
                let qrow = &q[((h * c.rows + r) * c.dk) as usize..][..c.dk as usize];
                let mut logits: Vec<(usize, f64)> = Vec::new();
                for j in 0..c.cells {
                    let m = f64::from(mask[(r * c.cells + j) as usize]);
                    if m == f64::NEG_INFINITY {
                        continue;
                    }
                    let krow = &k[((kh * c.cells + j) * c.dk) as usize..][..c.dk as usize];
                    let mut s: f64 = qrow
                        .iter()
                        .zip(krow)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum();
                    s *= scale;
                    if c.softcap != 0.0 {
                        s = f64::from(c.softcap) * (s / f64::from(c.softcap)).tanh();
                    }
                    logits.push((j as usize, s + slope * m));
                }
                let sink = c.sinks.then(|| f64::from(sinks[h as usize]));
                let max = logits
                    .iter()
                    .map(|l| l.1)
                    .chain(sink)
                    .fold(f64::NEG_INFINITY, f64::max);
                let mut sum = sink.map_or(0.0, |s| (s - max).exp());
                let mut acc = vec![0f64; c.dv as usize];
                for (j, s) in logits {
                    let p = (s - max).exp();
                    sum += p;
                    let vrow = &v[((kh * c.cells) as usize + j) * c.dv as usize..][..c.dv as usize];
                    for (a, x) in acc.iter_mut().zip(vrow) {
                        *a += p * f64::from(*x);
                    }
                }
                let dst = &mut out[((r * c.heads + h) * c.dv) as usize..][..c.dv as usize];
                for (d, a) in dst.iter_mut().zip(acc) {
                    *d = if sum > 0.0 { (a / sum) as f32 } else { 0.0 };
                }
            }
        }
        out
    }

    fn check(c: Case, seed: u64) {
        let mut rng = Rng::new(seed);
        let q: Vec<f32> = (0..c.dk * c.rows * c.heads)
            .map(|_| rng.signed() * 2.0)
            .collect();
        let k: Vec<f32> = (0..c.dk * c.cells * c.kv_heads)
            .map(|_| rng.signed())
            .collect();
        let v: Vec<f32> = (0..c.dv * c.cells * c.kv_heads)
            .map(|_| rng.signed())
            .collect();
        // Row r sees a prefix of its sequence's cells, with every seventh
        // cell masked out and a small bias on the rest (an ALiBi-style
        // position).
        let mask: Vec<f32> = (0..c.rows * c.cells)
            .map(|i| {
                let (r, j) = (i / c.cells, i % c.cells);
                let other = (j / 96) % c.seqs != r * c.seqs / c.rows;
                if j > c.cells - c.rows + r || j % 7 == 3 || other {
                    f32::NEG_INFINITY
                } else {
                    -((c.cells - j) as f32) / 64.0
                }
            })
            .collect();
        let sinks: Vec<f32> = (0..c.heads).map(|_| rng.signed() * 3.0).collect();
        let (k16, k) = to_f16(&k);
        let (v16, v) = to_f16(&v);
        let (m16, mask) = to_f16(&mask);
        let got = ggml(c, &q, &k16, &v16, &m16, &sinks);
        let want = reference(c, &q, &k, &v, &mask, &sinks);
        // A NaN or infinity counts as the largest difference (`f32::max`
        // passes over a NaN).
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| {
                if a.is_finite() {
                    (a - b).abs()
                } else {
                    f32::INFINITY
                }
            })
            .fold(0f32, f32::max);
        assert!(worst < 5e-3, "{c:?}: largest difference {worst}");
    }

    #[test]
    fn few_row_attention_matches_a_reference_on_every_option() {
        glassbox_models::cpu::load_kernels().expect("CPU kernels");
        let base = Case {
            dk: 64,
            dv: 64,
            rows: 1,
            heads: 9,
            kv_heads: 3,
            cells: 700,
            max_bias: 0.0,
            softcap: 0.0,
            sinks: false,
            seqs: 1,
        };
        let cases = [
            base, // one row, cells split
            Case {
                rows: 5,
                cells: 300,
                ..base
            }, // rows split
            Case {
                rows: 3,
                cells: 900,
                sinks: true,
                ..base
            }, // sinks, rows
            Case {
                sinks: true,
                softcap: 30.0,
                dk: 128,
                dv: 128,
                heads: 8,
                kv_heads: 2,
                ..base
            },
            Case {
                max_bias: 8.0,
                heads: 12,
                kv_heads: 12,
                rows: 2,
                ..base
            }, // ALiBi, no grouping
            Case {
                dk: 72,
                dv: 40,
                heads: 4,
                kv_heads: 1,
                rows: 4,
                cells: 200,
                ..base
            }, // odd widths
            Case {
                dk: 576,
                dv: 512,
                heads: 4,
                kv_heads: 1,
                rows: 2,
                cells: 130,
                ..base
            }, // MLA-like
            Case {
                heads: 32,
                kv_heads: 8,
                rows: 3,
                cells: 400,
                ..base
            }, // Llama-3-like: more heads than one pass over the cells takes
            Case {
                heads: 32,
                kv_heads: 8,
                cells: 600,
                ..base
            }, // the same, one row, cells split
            Case {
                rows: 6,
                seqs: 2,
                cells: 800,
                ..base
            }, // two sequences' rows in one stream, three each (a token and its draft)
            Case {
                rows: 4,
                seqs: 4,
                cells: 1500,
                sinks: true,
                ..base
            }, // four sequences' lone rows: long runs of masked cells
            Case {
                seqs: 2,
                cells: 1200,
                ..base
            }, // one row among another sequence's cells, split over the threads
            Case {
                rows: 8,
                seqs: 2,
                heads: 32,
                kv_heads: 8,
                cells: 700,
                ..base
            }, // the same with Llama-3-like heads
            Case {
                rows: 64,
                cells: 200,
                ..base
            }, // prompt rows: the tiled path
            Case {
                rows: 100,
                cells: 300,
                sinks: true,
                ..base
            }, // a partial tile of rows, a partial tile of cells, sinks
            Case {
                rows: 70,
                max_bias: 8.0,
                heads: 12,
                kv_heads: 4,
                cells: 150,
                ..base
            }, // ALiBi: a mask per head in the tiled path
            Case {
                rows: 65,
                softcap: 30.0,
                dk: 128,
                dv: 128,
                heads: 32,
                kv_heads: 8,
                cells: 130,
                ..base
            }, // soft-capping, Llama-3-like heads
        ];
        for (i, c) in cases.into_iter().enumerate() {
            check(c, 7 + i as u64);
        }
    }
}
