//! Scoring a query against stored vectors: every vector (exact search) as
//! one matrix-vector product by `gemm` over each thread's share, and a few
//! candidates (the HNSW graph's, rescored) by NumKong's dot product. Both
//! pick their kernels for the running CPU at run time (ADR 0004, ADR 0012).

use std::sync::{Arc, Mutex};

/// `a·b` by NumKong (usearch's own kernels, chosen per CPU at run time; it
/// accumulates in `f64`). `a` and `b` have the index's dimensions. Rescores
/// the graph's few candidates; exact search takes [`matvec`].
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    <f32 as numkong::Dot>::dot(a, b).map_or(f32::NAN, |d| d as f32)
}

/// `out[i] = rows[i]·x` for the `out.len()` row-major `x.len()`-long rows of
/// `rows`: one matrix-vector product by `gemm` (its kernels chosen per CPU at
/// run time: AVX-512, AVX2+FMA or SSE), which keeps several products in flight
/// where a dot product at a time waits on one chain (ADR 0012). Each row's
/// result depends on that row alone, so it is the same whatever the split.
fn matvec(out: &mut [f32], rows: &[f32], x: &[f32]) {
    let (m, k) = (out.len(), x.len());
    assert_eq!(rows.len(), m * k, "rows hold out.len() vectors of x.len()");
    if m == 0 || k == 0 {
        out.fill(0.0);
        return;
    }
    let stride = isize::try_from(k).expect("a vector fits in memory");
    // SAFETY: gemm reads `rows` as an m × k matrix (row stride k, column
    // stride 1) and `x` as a k × 1 matrix, and writes `out` as m × 1, all
    // within the slices' lengths checked above; `alpha` is not read when
    // `read_dst` is false, so `out`'s old contents do not matter; nothing
    // aliases `out`.
    #[allow(unsafe_code)]
    unsafe {
        gemm::gemm(
            m,
            1,
            k,
            out.as_mut_ptr(),
            1,
            1,
            false,
            rows.as_ptr(),
            1,
            stride,
            x.as_ptr(),
            1,
            1,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

/// Fewer vectors than this per thread are scored on one thread: handing a
/// share to another thread costs about as much as scoring a few thousand.
const EXACT_ROWS_PER_THREAD: usize = 4096;

/// A pool of `threads` threads that lives across queries (one per thread
/// count asked for): starting threads for every query cost more than a
/// 20,000-vector product on a busy machine.
fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = pools.iter().find(|(n, _)| *n == threads) {
        return Some(Arc::clone(p));
    }
    let built = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("glassbox-exact-{i}"))
        .build()
        .ok()
        .map(Arc::new)?;
    pools.push((threads, Arc::clone(&built)));
    Some(built)
}

/// `query`'s dot product with every `dim`-long vector in `vectors`, on up
/// to `threads` threads, each a matrix-vector product over a contiguous
/// share (numpy's BLAS splits its product the same way): a base larger than
/// the caches is read faster by several cores than by one.
pub(super) fn score_all(query: &[f32], vectors: &[f32], dim: usize, threads: usize) -> Vec<f32> {
    let rows = vectors.len() / dim.max(1);
    let mut scores = vec![0.0f32; rows];
    let threads = threads.min(rows / EXACT_ROWS_PER_THREAD).max(1);
    let share = rows.div_ceil(threads).max(1);
    let pool = if threads > 1 { pool(threads) } else { None };
    let Some(pool) = pool else {
        matvec(&mut scores, &vectors[..rows * dim], query);
        return scores;
    };
    pool.scope(|scope| {
        for (out, part) in scores.chunks_mut(share).zip(vectors.chunks(share * dim)) {
            scope.spawn(move |_| matvec(out, part, query));
        }
    });
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_a_plain_sum_for_any_length() {
        for len in [0, 1, 15, 16, 17, 384, 389] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
            let fast = f64::from(dot(&a, &b));
            assert!((fast - plain).abs() < 1e-4, "len {len}: {fast} vs {plain}");
        }
    }

    #[test]
    fn the_matrix_vector_product_matches_plain_sums_for_any_shape() {
        // Lengths around the SIMD widths (4, 8, 16 lanes, 8 accumulators)
        // and row counts around gemm's small-matrix path (m ≤ 256).
        for dim in [1, 2, 3, 15, 16, 17, 127, 128, 384, 389] {
            for rows in [0, 1, 5, 255, 256, 300] {
                let vectors: Vec<f32> = (0..rows * dim).map(|i| (i as f32 * 0.013).sin()).collect();
                let query: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.7).cos()).collect();
                let mut out = vec![f32::NAN; rows];
                matvec(&mut out, &vectors, &query);
                for (r, (got, v)) in out.iter().zip(vectors.chunks_exact(dim)).enumerate() {
                    let plain: f64 = v.iter().zip(&query).map(|(a, b)| f64::from(a * b)).sum();
                    let err = (f64::from(*got) - plain).abs();
                    assert!(
                        err < 1e-4 * (1.0 + plain.abs()),
                        "{dim}×{rows} row {r}: {got} vs {plain}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_vector_is_scored_in_order_on_any_number_of_threads() {
        let dim = 7;
        // More rows than one thread takes, and not a multiple of any share.
        let rows = 3 * EXACT_ROWS_PER_THREAD + 5;
        let vectors: Vec<f32> = (0..rows * dim).map(|i| (i as f32 * 0.013).sin()).collect();
        let query: Vec<f32> = (0..dim).map(|i| (i as f32 * 0.7).cos()).collect();
        let one = score_all(&query, &vectors, dim, 1);
        assert_eq!(one.len(), rows);
        for (s, v) in one.iter().zip(vectors.chunks_exact(dim)) {
            assert!((s - dot(&query, v)).abs() < 1e-4, "{s}");
        }
        // A row's score does not depend on how the rows were split.
        for threads in [2, 3, 8] {
            assert_eq!(
                score_all(&query, &vectors, dim, threads),
                one,
                "{threads} threads"
            );
        }
        assert!(score_all(&query, &[], dim, 4).is_empty());
    }
}
