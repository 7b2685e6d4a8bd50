// Flash attention for a few query rows (decode steps, short prompt chunks)
// with F16 keys and values, compiled into every CPU variant of ggml
// (crates/models/cmake/project-include.cmake; docs/adr/0004-cpu-kernels.md,
// "Attention for a few query rows").
//
// ggml's own kernel for these rows walks the cached cells one at a time:
// a dot product, a scalar `expf` and an F16 multiply-add that converts the
// accumulator to F32 and back, per cell and query head. On RAG prompts
// (~600 cells) that was about 40% of a decode step's CPU on two cores. This
// one takes the cells a block at a time: the block's scores, one vector
// `exp` over them (ggml's own `ggml_vec_soft_max_f32`), then the block's
// values added into an F32 accumulator. Same online softmax, same result up
// to rounding; the accumulator is F32 where ggml's is F16.
//
// It handles what ggml's per-row and split-KV paths handle for F32 queries
// and F16 keys and values, with the same choice between them (split a lone
// query row's cells over the threads when the cache holds 512 or more, else
// the rows), so a row's result depends on the shape of its micro-batch
// exactly as it did before (docs/adr/0006-batch-invariant-decoding.md). A
// lone row's visible cells are shared out evenly, where ggml shares out the
// cache's range.
// Everything else (64 or more query rows: ggml's tiled kernel; quantised
// caches; the reference path) goes to ggml's own function, renamed in
// ops.cpp by the CMake hook.

#include "ggml-cpu-impl.h"
#include "ggml-cpu.h"
#include "ops.h"
#include "vec.h"
#include "common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

// ggml's own function, renamed in ops.cpp (see above).
extern "C" void ggml_compute_forward_flash_attn_ext_upstream(const ggml_compute_params * params, ggml_tensor * dst);

// The mark a test looks for in every CPU variant library: a build without
// the CMake hook would carry ggml's kernel alone.
__attribute__((used, retain)) static const char glassbox_flash_attn_rows_mark[] =
    "glassbox: flash attention for a few rows";

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__F16C__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace {

// Cells scored per block.
constexpr int64_t BLOCK = 64;

// The vector loops of this variant: F16 rows widened to F32 lanes (F16C),
// multiplied and added in F32. Variants without AVX2 + F16C + FMA take
// ggml's own vector functions, one cell at a time.
#if defined(__AVX512F__)
#define GB_ROWS_SIMD 1
using Lanes = __m512;
constexpr int64_t W = 16;
inline Lanes load_f16(const ggml_fp16_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p)); }
inline Lanes load_f32(const float * p) { return _mm512_loadu_ps(p); }
inline void store_f32(float * p, Lanes x) { _mm512_storeu_ps(p, x); }
inline Lanes fma(Lanes a, Lanes b, Lanes c) { return _mm512_fmadd_ps(a, b, c); }
inline Lanes splat(float x) { return _mm512_set1_ps(x); }
inline Lanes zero() { return _mm512_setzero_ps(); }
inline Lanes mul(Lanes a, Lanes b) { return _mm512_mul_ps(a, b); }
inline Lanes max(Lanes a, Lanes b) { return _mm512_max_ps(a, b); }
inline float hmax(Lanes x) { return _mm512_reduce_max_ps(x); }
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define GB_ROWS_SIMD 1
using Lanes = __m256;
constexpr int64_t W = 8;
inline Lanes load_f16(const ggml_fp16_t * p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p)); }
inline Lanes load_f32(const float * p) { return _mm256_loadu_ps(p); }
inline void store_f32(float * p, Lanes x) { _mm256_storeu_ps(p, x); }
inline Lanes fma(Lanes a, Lanes b, Lanes c) { return _mm256_fmadd_ps(a, b, c); }
inline Lanes splat(float x) { return _mm256_set1_ps(x); }
inline Lanes zero() { return _mm256_setzero_ps(); }
inline Lanes mul(Lanes a, Lanes b) { return _mm256_mul_ps(a, b); }
inline Lanes max(Lanes a, Lanes b) { return _mm256_max_ps(a, b); }
inline float hmax(Lanes x) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
#else
#define GB_ROWS_SIMD 0
#endif

#if GB_ROWS_SIMD
// Dot products of the F32 query with eight F16 key rows (DK a multiple of
// W). Each row's lanes are summed by the same tree whatever the other
// seven rows are, so a cell's score does not depend on its neighbours.
inline void dot_rows8(const ggml_fp16_t * const * k, const float * q, int64_t DK, float * out) {
    __m256 h[8];
#if defined(__AVX512F__)
    __m512 acc[8];
    for (int c = 0; c < 8; ++c) {
        acc[c] = zero();
    }
    for (int64_t d = 0; d < DK; d += W) {
        const Lanes qv = load_f32(q + d);
        for (int c = 0; c < 8; ++c) {
            acc[c] = fma(load_f16(k[c] + d), qv, acc[c]);
        }
    }
    for (int c = 0; c < 8; ++c) {
        const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[c]), 1));
        h[c] = _mm256_add_ps(_mm512_castps512_ps256(acc[c]), high);
    }
#else
    for (int c = 0; c < 8; ++c) {
        h[c] = zero();
    }
    for (int64_t d = 0; d < DK; d += W) {
        const Lanes qv = load_f32(q + d);
        for (int c = 0; c < 8; ++c) {
            h[c] = fma(load_f16(k[c] + d), qv, h[c]);
        }
    }
#endif
    // [c0..c3 low halves | c0..c3 high halves] and the same for c4..c7.
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(h[4], h[5]), _mm256_hadd_ps(h[6], h[7]));
    const __m256 lo = _mm256_permute2f128_ps(u0, u1, 0x20);
    const __m256 hi = _mm256_permute2f128_ps(u0, u1, 0x31);
    _mm256_storeu_ps(out, _mm256_add_ps(lo, hi));
}

// vkq[d0 .. d0 + T·W) += Σ_j weight[j] · V row cell[j], T vectors of lanes
// held in registers across the block's cells.
template <int T>
inline void add_values(float * vkq, int64_t d0, const char * v_base, size_t nbv1, const int64_t * cell,
                       const float * weight, int n) {
    Lanes acc[T];
    for (int t = 0; t < T; ++t) {
        acc[t] = load_f32(vkq + d0 + t * W);
    }
    for (int j = 0; j < n; ++j) {
        const Lanes w = splat(weight[j]);
        const ggml_fp16_t * row = (const ggml_fp16_t *) (v_base + cell[j] * nbv1) + d0;
        for (int t = 0; t < T; ++t) {
            acc[t] = fma(load_f16(row + t * W), w, acc[t]);
        }
    }
    for (int t = 0; t < T; ++t) {
        store_f32(vkq + d0 + t * W, acc[t]);
    }
}
#endif

struct Attention {
    const ggml_tensor * q;
    const ggml_tensor * k;
    const ggml_tensor * v;
    const ggml_tensor * mask;
    const ggml_tensor * sinks;
    ggml_tensor * dst;
    int64_t DK, DV;
    int64_t rk2, rk3, rv2, rv3;
    float scale, max_bias, softcap, m0, m1;
    uint32_t n_head_log2;
};

Attention attention_of(ggml_tensor * dst) {
    Attention a{};
    a.q = dst->src[0];
    a.k = dst->src[1];
    a.v = dst->src[2];
    a.mask = dst->src[3];
    a.sinks = dst->src[4];
    a.dst = dst;
    a.DK = a.k->ne[0];
    a.DV = a.v->ne[0];
    a.rk2 = a.q->ne[2] / a.k->ne[2];
    a.rk3 = a.q->ne[3] / a.k->ne[3];
    a.rv2 = a.q->ne[2] / a.v->ne[2];
    a.rv3 = a.q->ne[3] / a.v->ne[3];
    std::memcpy(&a.scale, (const float *) dst->op_params + 0, sizeof(float));
    std::memcpy(&a.max_bias, (const float *) dst->op_params + 1, sizeof(float));
    std::memcpy(&a.softcap, (const float *) dst->op_params + 2, sizeof(float));
    if (a.softcap != 0.0f) {
        a.scale /= a.softcap;
    }
    const uint32_t n_head = (uint32_t) a.q->ne[2];
    a.n_head_log2 = 1u << (uint32_t) std::floor(std::log2((double) n_head));
    a.m0 = std::pow(2.0f, -(a.max_bias) / a.n_head_log2);
    a.m1 = std::pow(2.0f, -(a.max_bias / 2.0f) / a.n_head_log2);
    return a;
}

// Whether this file's kernel takes the op: F32 queries, F16 keys and
// values, fewer query rows than ggml's tile, contiguous rows.
bool handled(const ggml_compute_params * params, const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const int32_t prec = dst->op_params[3];
    return !params->use_ref && (prec == GGML_PREC_DEFAULT || prec == GGML_PREC_F32) &&
           q->type == GGML_TYPE_F32 && k->type == GGML_TYPE_F16 && v->type == GGML_TYPE_F16 &&
           q->ne[1] < (int64_t) ggml_fa_tile_config::Q && q->nb[0] == sizeof(float) &&
           k->nb[0] == sizeof(ggml_fp16_t) && v->nb[0] == sizeof(ggml_fp16_t) &&
           dst->nb[0] == sizeof(float) && q->ne[0] == k->ne[0] && dst->ne[0] == v->ne[0] &&
           (dst->src[3] == nullptr || dst->src[3]->type == GGML_TYPE_F16);
}

// The cells of [ic0, ic1) a mask row leaves visible, with their mask
// values: found once per mask row and range, then used by every head that
// shares the row (llama.cpp's mask is the same for all heads; in one KV
// stream holding several sequences most cells are masked out). Each
// thread keeps its own, emptied at every op, since the mask's buffer is
// rewritten between graph runs.
struct Visible {
    const ggml_fp16_t * mp = nullptr;
    int64_t ic0 = -1;
    int64_t ic1 = -1;
    bool valid = false;
    std::vector<int64_t> cells;
    std::vector<float> bias;

    void fill(const ggml_fp16_t * row, int64_t from, int64_t to) {
        if (valid && row == mp && from == ic0 && to == ic1) {
            return;
        }
        mp = row;
        ic0 = from;
        ic1 = to;
        valid = true;
        cells.clear();
        bias.clear();
        for (int64_t ic = from; ic < to; ++ic) {
            const float m = row ? GGML_CPU_FP16_TO_FP32(row[ic]) : 0.0f;
            if (m != -INFINITY) {
                cells.push_back(ic);
                bias.push_back(m);
            }
        }
    }
};

thread_local Visible visible_cells;

// A query row: its position in the batch (i1), head (i2) and stream (i3).
struct Row {
    int64_t i1, i2, i3;
};

// Online softmax of query row `r` over share `part` of `parts` of the
// cells of [ic0, ic1) its mask leaves visible: leaves the unnormalised sum
// of values in `vkq` (F32, DV), returns the running max in `M` and the sum
// of weights in `S`. `v32` (DV floats) and `q16` (DK halves) are scratch.
void attend_row(const Attention & a, Visible & visible, Row r, int64_t ic0, int64_t ic1, int64_t part,
                int64_t parts, float * vkq, float * v32, ggml_fp16_t * q16, float & M, float & S) {
    const ggml_tensor * q = a.q;
    const ggml_tensor * k = a.k;
    const ggml_tensor * v = a.v;
    const int64_t iq1 = r.i1;
    const int64_t iq2 = r.i2;
    const int64_t iq3 = r.i3;

    const uint32_t h = (uint32_t) iq2;
    const float slope = a.max_bias > 0.0f
                            ? (h < a.n_head_log2 ? std::pow(a.m0, (float) (h + 1))
                                                 : std::pow(a.m1, (float) (2 * (h - a.n_head_log2) + 1)))
                            : 1.0f;

    const ggml_fp16_t * mp =
        a.mask ? (const ggml_fp16_t *) ((const char *) a.mask->data + iq1 * a.mask->nb[1] +
                                        (iq2 % a.mask->ne[2]) * a.mask->nb[2] +
                                        (iq3 % a.mask->ne[3]) * a.mask->nb[3])
               : nullptr;

    const int64_t ik2 = iq2 / a.rk2;
    const int64_t ik3 = iq3 / a.rk3;
    const int64_t iv2 = iq2 / a.rv2;
    const int64_t iv3 = iq3 / a.rv3;
    const char * k_base = (const char *) k->data + ik2 * k->nb[2] + ik3 * k->nb[3];
    const char * v_base = (const char *) v->data + iv2 * v->nb[2] + iv3 * v->nb[3];

    const float * pq = (const float *) ((const char *) q->data + iq1 * q->nb[1] + iq2 * q->nb[2] + iq3 * q->nb[3]);
#if GB_ROWS_SIMD
    const bool simd = a.DK % W == 0 && a.DV % W == 0;
#else
    const bool simd = false;
#endif
    if (!simd) {
        ggml_cpu_fp32_to_fp16(pq, q16, a.DK);
    }

    std::memset(vkq, 0, a.DV * sizeof(float));
    M = -INFINITY;
    S = 0.0f;

    float raw[BLOCK + 8];
    float score[BLOCK];
    float weight[BLOCK];

    visible.fill(mp, ic0, ic1);
    const int64_t n_all = (int64_t) visible.cells.size();
    const int64_t first = n_all * part / parts;
    const int64_t n_visible = n_all * (part + 1) / parts - first;
    const int64_t * cells = visible.cells.data() + first;
    const float * bias = visible.bias.data() + first;
    for (int64_t b0 = 0; b0 < n_visible; b0 += BLOCK) {
        const int64_t b1 = std::min(b0 + BLOCK, n_visible);
        const int n = (int) (b1 - b0);
        const int64_t * cell = cells + b0;
        float block_max = -INFINITY;
#if GB_ROWS_SIMD
        if (simd) {
            // The block's raw dot products, eight rows at a time (the last
            // group padded with its last row).
            const ggml_fp16_t * rows[BLOCK + 8];
            for (int j = 0; j < n; ++j) {
                rows[j] = (const ggml_fp16_t *) (k_base + cell[j] * k->nb[1]);
            }
            for (int j = n; j % 8 != 0; ++j) {
                rows[j] = rows[n - 1];
            }
            for (int j = 0; j < n; j += 8) {
                dot_rows8(rows + j, pq, a.DK, raw + j);
            }
        }
#endif
        int j0 = 0;
#if GB_ROWS_SIMD
        if (simd && a.softcap == 0.0f) {
            // The block's scores a vector at a time: scale, then the mask's
            // bias times the slope added in one multiply-add (as the scalar
            // loop below compiles), and the block's maximum; the scalar
            // loop's running maximum was a chain of dependent instructions.
            const Lanes scale = splat(a.scale);
            const Lanes sl = splat(slope);
            Lanes mx = splat(-INFINITY);
            for (; j0 + W <= n; j0 += W) {
                const Lanes sv = fma(sl, load_f32(bias + b0 + j0), mul(load_f32(raw + j0), scale));
                store_f32(score + j0, sv);
                mx = max(mx, sv);
            }
            block_max = hmax(mx);
        }
#endif
        for (int j = j0; j < n; ++j) {
            float s;
#if GB_ROWS_SIMD
            if (simd) {
                s = raw[j];
            } else
#endif
            {
                const ggml_fp16_t * k_row = (const ggml_fp16_t *) (k_base + cell[j] * k->nb[1]);
                ggml_vec_dot_f16((int) a.DK, &s, 0, (ggml_fp16_t *) k_row, 0, q16, 0, 1);
            }
            s *= a.scale;
            if (a.softcap != 0.0f) {
                s = a.softcap * std::tanh(s);
            }
#if defined(__FMA__) || defined(__AVX512F__)
            s = std::fma(slope, bias[b0 + j], s);  // as the vector loop above
#else
            s += slope * bias[b0 + j];
#endif
            score[j] = s;
            block_max = std::max(block_max, s);
        }
        if (block_max == -INFINITY) {
            continue;
        }
        if (block_max > M) {
            if (M != -INFINITY) {
                const float ms = std::exp(M - block_max);
                ggml_vec_scale_f32((int) a.DV, vkq, ms);
                S *= ms;
            }
            M = block_max;
        }
        S += (float) ggml_vec_soft_max_f32(n, weight, score, M);
#if GB_ROWS_SIMD
        if (simd) {
            int64_t d0 = 0;
            for (; d0 + 4 * W <= a.DV; d0 += 4 * W) {
                add_values<4>(vkq, d0, v_base, v->nb[1], cell, weight, n);
            }
            for (; d0 < a.DV; d0 += W) {
                add_values<1>(vkq, d0, v_base, v->nb[1], cell, weight, n);
            }
            continue;
        }
#endif
        for (int j = 0; j < n; ++j) {
            if (weight[j] == 0.0f) {
                continue;
            }
            ggml_cpu_fp16_to_fp32((const ggml_fp16_t *) (v_base + cell[j] * v->nb[1]), v32, a.DV);
            ggml_vec_mad_f32((int) a.DV, vkq, v32, weight[j]);
        }
    }
}

// Adds head `h`'s sink logit to (M, S, vkq), as ggml does on the first
// chunk of cells.
void add_sink(const Attention & a, int64_t h, float * vkq, float & M, float & S) {
    if (a.sinks == nullptr) {
        return;
    }
    const float s = ((const float *) a.sinks->data)[h];
    float ms = 1.0f;
    float vs = 1.0f;
    if (s > M) {
        ms = std::exp(M - s);
        M = s;
        ggml_vec_scale_f32((int) a.DV, vkq, ms);
    } else {
        vs = std::exp(s - M);
    }
    S = S * ms + vs;
}

// Writes row `r`'s normalised output in ggml's permuted layout.
void write_row(const Attention & a, Row r, float * vkq, float S) {
    const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
    ggml_vec_scale_f32((int) a.DV, vkq, S_inv);
    const int64_t ne1 = a.dst->ne[1];
    const int64_t ne2 = a.dst->ne[2];
    const size_t nb1 = a.dst->nb[1];
    std::memcpy((char *) a.dst->data + (r.i3 * ne2 * ne1 + r.i2 + r.i1 * ne1) * nb1, vkq, nb1);
}

}  // namespace

extern "C" void ggml_compute_forward_flash_attn_ext(const ggml_compute_params * params, ggml_tensor * dst) {
    if (!handled(params, dst)) {
        ggml_compute_forward_flash_attn_ext_upstream(params, dst);
        return;
    }
    Visible & visible = visible_cells;
    visible.valid = false;
    const Attention a = attention_of(dst);
    const ggml_tensor * q = a.q;
    const int ith = params->ith;
    const int nth = params->nth;
    const int64_t nek1 = a.k->ne[1];
    const int64_t per_thread = a.DK + 2 * a.DV + (int64_t) CACHE_LINE_SIZE_F32;
    float * vkq = (float *) params->wdata + ith * per_thread;
    float * v32 = vkq + a.DV;
    ggml_fp16_t * q16 = (ggml_fp16_t *) (vkq + 2 * a.DV);

    // ggml's rule for splitting the cells rather than the rows.
    const bool split_kv = q->ne[1] == 1 && q->ne[3] == 1 && nek1 >= 512;
    if (!split_kv) {
        // (row, head) pairs, a thread's share in row order so that the
        // heads of a row run one after another on one thread (see Visible).
        const int64_t neq1 = q->ne[1];
        const int64_t neq2 = q->ne[2];
        const int64_t nr = neq1 * neq2 * q->ne[3];
        const int64_t dr = (nr + nth - 1) / nth;
        const int64_t jr0 = dr * ith;
        const int64_t jr1 = std::min(jr0 + dr, nr);
        for (int64_t jr = jr0; jr < jr1; ++jr) {
            const int64_t i3 = jr / (neq1 * neq2);
            const int64_t i1 = (jr - i3 * neq1 * neq2) / neq2;
            const Row r{i1, jr - i3 * neq1 * neq2 - i1 * neq2, i3};
            float M;
            float S;
            attend_row(a, visible, r, 0, nek1, 0, 1, vkq, v32, q16, M, S);
            add_sink(a, r.i2, vkq, M, S);
            write_row(a, r, vkq, S);
        }
        return;
    }

    // One query row: each thread takes a share of the row's visible cells
    // for every head (an equal share: in a stream holding several
    // sequences a row's cells may all lie in one part of the cache, and a
    // share of the cache's range left one thread idle), then the partial
    // results are merged per head (ggml's partials layout).
    const int64_t n_heads = q->ne[2];
    const int64_t partial_size = 2 + a.DV;
    float * partials = (float *) params->wdata + nth * per_thread;
    for (int64_t h = 0; h < n_heads; ++h) {
        float * out = partials + (h * nth + ith) * partial_size;
        float M;
        float S;
        attend_row(a, visible, Row{0, h, 0}, 0, nek1, ith, nth, out + 2, v32, q16, M, S);
        if (ith == 0) {
            add_sink(a, h, out + 2, M, S);
        }
        out[0] = M;
        out[1] = S;
    }
    ggml_barrier(params->threadpool);
    for (int64_t h = ith; h < n_heads; h += nth) {
        float M = -INFINITY;
        float S = 0.0f;
        std::memset(vkq, 0, a.DV * sizeof(float));
        for (int64_t t = 0; t < nth; ++t) {
            const float * part = partials + (h * nth + t) * partial_size;
            if (part[1] == 0.0f) {
                continue;
            }
            const float M_new = std::max(M, part[0]);
            const float keep = std::exp(M - M_new);
            const float add = std::exp(part[0] - M_new);
            for (int64_t d = 0; d < a.DV; ++d) {
                vkq[d] = vkq[d] * keep + part[2 + d] * add;
            }
            S = S * keep + part[1] * add;
            M = M_new;
        }
        write_row(a, Row{0, h, 0}, vkq, S);
    }
}
