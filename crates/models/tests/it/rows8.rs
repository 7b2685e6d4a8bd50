//! Quantised weights eight rows at a time: the matrix-product kernel for
//! Q4_1 and Q8_0 weights Glassbox builds into every CPU variant of ggml
//! (`crates/models/kernels/mul-mat-rows8.cpp`, docs/adr/0004-cpu-kernels.md,
//! "Quantised weights eight rows at a time").

/// Every CPU variant library of this build carries the kernel.
#[test]
#[cfg(target_arch = "x86_64")]
fn every_cpu_variant_carries_the_rows8_kernel() {
    crate::common::assert_every_cpu_variant_carries(
        glassbox_models::cpu::MUL_MAT_ROWS8_MARK,
        "mul-mat-rows8.cpp",
    );
}

/// One Q4_1 or Q8_0 matrix product on ggml's CPU backend (whatever variant this CPU
/// loads), with the weights in a buffer marked as a model's weights (the
/// kernel's path) and in an ordinary one (ggml's own dot products), against
/// each other and against a plain reference.
#[allow(unsafe_code)]
#[cfg(target_arch = "x86_64")]
mod against_ggml {
    use glassbox_models::cpu::Feature;
    use llama_cpp_sys_2 as sys;

    use crate::common::Rng;
    use crate::common::cpu_op::{self, Input};

    /// The loaded variant library's answer to "has this tensor a packed
    /// copy", i.e. did its products run on the kernel.
    fn packed_query() -> extern "C" fn(*const sys::ggml_tensor) -> i32 {
        let choice = glassbox_models::cpu::load_kernels().expect("CPU kernels");
        let path = std::ffi::CString::new(choice.path.to_str().expect("a UTF-8 path"))
            .expect("a path without NUL");
        // SAFETY: dlopen with RTLD_NOLOAD only finds the library ggml already
        // loaded (null otherwise), and ggml keeps it loaded for the process;
        // the symbol, when present, is the kernel's
        // `int glassbox_mul_mat_rows8_packed(const ggml_tensor *)`.
        unsafe {
            let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            assert!(!handle.is_null(), "{} is not loaded", choice.path.display());
            let f = libc::dlsym(handle, c"glassbox_mul_mat_rows8_packed".as_ptr());
            assert!(
                !f.is_null(),
                "{} has no rows8 kernel (rebuild llama.cpp)",
                choice.path.display()
            );
            std::mem::transmute::<*mut libc::c_void, extern "C" fn(*const sys::ggml_tensor) -> i32>(
                f,
            )
        }
    }

    /// Whether the loaded variant runs the kernel (it needs AVX2, FMA, F16C).
    fn kernel_expected() -> bool {
        let choice = glassbox_models::cpu::load_kernels().expect("CPU kernels");
        [Feature::Avx2, Feature::Fma, Feature::F16c]
            .iter()
            .all(|f| choice.uses.contains(f))
    }

    /// `x` (`tokens` rows of `k`) times the weights (`rows` rows of
    /// `k`), [tokens][rows], on ggml's default four threads, and whether the kernel took
    /// the weights; `weights`: the buffer is marked as holding a model's
    /// weights.
    fn ggml(
        ty: sys::ggml_type,
        q: &[u8],
        rows: i64,
        k: i64,
        x: &[f32],
        tokens: i64,
        weights: bool,
    ) -> (Vec<f32>, bool) {
        // SAFETY: both tensors are made in the context `run` gives, with
        // the shapes their data was made for.
        let (result, packed) = unsafe {
            cpu_op::run(
                8,
                weights,
                |ctx| {
                    let tw = sys::ggml_new_tensor_2d(ctx, ty, k, rows);
                    let tx = sys::ggml_new_tensor_2d(ctx, sys::GGML_TYPE_F32, k, tokens);
                    let out = sys::ggml_mul_mat(ctx, tw, tx);
                    (out, vec![Input::new(tw, q), Input::new(tx, x)])
                },
                |inputs| packed_query()(inputs[0].tensor) != 0,
            )
        };
        assert_eq!(result.len(), (rows * tokens) as usize);
        (result, packed)
    }

    /// Random weights of type `ty` (ggml's quantiser) and the values they
    /// stand for.
    fn weights(ty: sys::ggml_type, rows: i64, k: i64, rng: &mut Rng) -> (Vec<u8>, Vec<f32>) {
        // Rows of different sizes and offsets, as real layers have.
        let w: Vec<f32> = (0..rows * k)
            .map(|i| rng.signed() * (1.0 + (i / k % 5) as f32) + 0.1 * (i / k % 3) as f32)
            .collect();
        // SAFETY: `q` holds the row size of `ty` for `k` times `rows` bytes,
        // what ggml_quantize_chunk writes; `back` holds `rows * k` floats,
        // what the type's `to_float` writes for that many values.
        unsafe {
            let row = sys::ggml_row_size(ty, k);
            let mut q = vec![0u8; row * rows as usize];
            let written = sys::ggml_quantize_chunk(
                ty,
                w.as_ptr(),
                q.as_mut_ptr().cast(),
                0,
                rows,
                k,
                std::ptr::null(),
            );
            assert_eq!(written, q.len());
            let traits = sys::ggml_get_type_traits(ty);
            let to_float = (*traits).to_float.expect("the type's to_float");
            let mut back = vec![0f32; w.len()];
            to_float(q.as_ptr().cast(), back.as_mut_ptr(), rows * k);
            (q, back)
        }
    }

    fn check(ty: sys::ggml_type, rows: i64, k: i64, tokens: i64, seed: u64) {
        let mut rng = Rng::new(seed);
        let (q, w) = weights(ty, rows, k, &mut rng);
        let x: Vec<f32> = (0..tokens * k).map(|_| rng.signed() * 3.0).collect();
        // ggml's path first: the kernel keeps a packed copy per tensor, and
        // the next one may get the same addresses.
        let (theirs, ran_too) = ggml(ty, &q, rows, k, &x, tokens, false);
        assert!(!ran_too, "the kernel took weights not marked as a model's");
        let (got, ran) = ggml(ty, &q, rows, k, &x, tokens, true);
        if kernel_expected() && rows % 8 == 0 {
            assert!(
                ran,
                "type {ty} rows {rows} k {k} tokens {tokens}: kernel not run"
            );
        } else {
            assert!(!ran, "rows {rows}: the kernel took rows not in eights");
        }
        for t in 0..tokens as usize {
            let xs = &x[t * k as usize..][..k as usize];
            for r in 0..rows as usize {
                let ws = &w[r * k as usize..][..k as usize];
                let exact: f64 = ws
                    .iter()
                    .zip(xs)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                let size: f64 = ws
                    .iter()
                    .zip(xs)
                    .map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs())
                    .sum();
                let (g, o) = (got[t * rows as usize + r], theirs[t * rows as usize + r]);
                let at = format!("type {ty} rows {rows} k {k} tokens {tokens}: token {t} row {r}");
                assert!(g.is_finite(), "{at}: {g}");
                // Both quantise the token to 8 bits the same way; only the
                // order of the sums differs.
                assert!(
                    (f64::from(g) - f64::from(o)).abs() <= 1e-5 * size + 1e-6,
                    "{at}: kernel {g}, ggml {o}"
                );
                // The 8-bit token costs at most ~1/127 of each term.
                assert!(
                    (f64::from(g) - exact).abs() <= size / 100.0 + 1e-6,
                    "{at}: kernel {g}, exact {exact}"
                );
            }
        }
        // A token's result does not depend on the rest of its batch (ADR 0006).
        if tokens > 1 {
            for t in [0, tokens as usize - 1] {
                let (alone, _) = ggml(ty, &q, rows, k, &x[t * k as usize..][..k as usize], 1, true);
                assert_eq!(
                    alone.as_slice(),
                    &got[t * rows as usize..][..rows as usize],
                    "rows {rows} k {k}: token {t} alone differs from token {t} of {tokens}"
                );
            }
        }
    }

    #[test]
    fn quantised_products_match_ggml_and_a_reference() {
        glassbox_models::cpu::load_kernels().expect("CPU kernels");
        // SmolLM2's shapes (576 wide, 192 and 1536 rows; a Q8_0 output
        // head), one block, tokens in and out of the kernel's passes of
        // four (eight with AVX-512: 14 = 8 + 6, 16, 31), and rows not in
        // eights (ggml's path).
        let q4_1 = sys::GGML_TYPE_Q4_1;
        let q8_0 = sys::GGML_TYPE_Q8_0;
        let cases = [
            (q4_1, 576, 576, 1),
            (q4_1, 192, 576, 3),
            (q4_1, 1536, 576, 4),
            (q4_1, 576, 1536, 5),
            (q4_1, 8, 32, 9),
            (q4_1, 64, 96, 33),
            (q4_1, 16, 576, 2),
            (q4_1, 12, 64, 4),
            (q4_1, 64, 576, 14),
            (q4_1, 24, 1536, 31),
            (q8_0, 1024, 576, 1),
            (q8_0, 576, 576, 4),
            (q8_0, 64, 1536, 7),
            (q8_0, 8, 32, 2),
            (q8_0, 40, 576, 16),
            (q8_0, 20, 64, 3),
        ];
        for (i, (ty, rows, k, tokens)) in cases.into_iter().enumerate() {
            check(ty, rows, k, tokens, 11 + i as u64);
        }
    }
}
