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
// to rounding; the accumulator is F32 where ggml's is F16. The query heads
// of a row go through the cells together, each head's arithmetic unchanged.
//
// It handles what ggml's per-row and split-KV paths handle for F32 queries
// and F16 keys and values, with the same choice between them (split a lone
// query row's cells over the threads when the cache holds 512 or more, else
// the rows), so a row's result depends on the shape of its micro-batch
// exactly as it did before (docs/adr/0006-batch-invariant-decoding.md). A
// lone row's visible cells are shared out evenly, where ggml shares out the
// cache's range.
// 64 or more query rows go to flash-attn-tiles.cpp (ggml's tiled algorithm,
// keys packed once a KV head); everything else (quantised caches, the
// reference path) to ggml's own function, renamed in ops.cpp by the CMake
// hook.

#include "ggml-cpu-impl.h"
#include "ggml-cpu.h"
#include "ops.h"
#include "vec.h"
#include "common.h"
#include "flash-attn-common.h"

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

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

using namespace glassbox_attention;

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
// out[0..8) = the lane sums of h[0..8): each row's lanes summed by the same
// tree whatever the other seven rows are, so a cell's score does not depend
// on its neighbours.
inline void sum_rows8(const __m256 * h, float * out) {
    // [c0..c3 low halves | c0..c3 high halves] and the same for c4..c7.
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(h[4], h[5]), _mm256_hadd_ps(h[6], h[7]));
    const __m256 lo = _mm256_permute2f128_ps(u0, u1, 0x20);
    const __m256 hi = _mm256_permute2f128_ps(u0, u1, 0x31);
    _mm256_storeu_ps(out, _mm256_add_ps(lo, hi));
}

// Dot products of H F32 queries with the same eight F16 key rows (DK a
// multiple of W): out[h][c] = q[h] · k[c]. Each key row is widened once for
// all H queries; a query's lanes are added in the same order whatever H is.
// H·8 accumulators and H queries: H ≤ 3 fits AVX-512's 32 registers, only
// H = 1 AVX2's 16.
template <int H>
inline void dot_rows8(const ggml_fp16_t * const * k, const float * const * q, int64_t DK, float * const * out) {
    Lanes acc[H][8];
    for (int h = 0; h < H; ++h) {
        for (int c = 0; c < 8; ++c) {
            acc[h][c] = zero();
        }
    }
    for (int64_t d = 0; d < DK; d += W) {
        Lanes qv[H];
        for (int h = 0; h < H; ++h) {
            qv[h] = load_f32(q[h] + d);
        }
        for (int c = 0; c < 8; ++c) {
            const Lanes kv = load_f16(k[c] + d);
            for (int h = 0; h < H; ++h) {
                acc[h][c] = fma(kv, qv[h], acc[h][c]);
            }
        }
    }
    for (int h = 0; h < H; ++h) {
        __m256 lanes8[8];
        for (int c = 0; c < 8; ++c) {
#if defined(__AVX512F__)
            const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[h][c]), 1));
            lanes8[c] = _mm256_add_ps(_mm512_castps512_ps256(acc[h][c]), high);
#else
            lanes8[c] = acc[h][c];
#endif
        }
        sum_rows8(lanes8, out[h]);
    }
}

// Most query heads one dot_rows8 and one add_values serve in this variant
// (their accumulators held in its vector registers).
#if defined(__AVX512F__)
constexpr int64_t DOT_HEADS = 3;
constexpr int VALUE_HEADS = 4;
#else
constexpr int64_t DOT_HEADS = 1;
constexpr int VALUE_HEADS = 2;
#endif

// For each of H heads reading the same value rows: vkq[h][d0 .. d0 + T·W)
// += Σ_j weight[h][j] · row[j], T vectors of lanes a head held in registers
// across the block's cells. A head's sums are added in the same order
// whatever H is; H heads give the multiply-adds H·T independent chains
// and widen each row once.
template <int T, int H>
inline void add_values(float * const * vkq, int64_t d0, const ggml_fp16_t * const * row,
                       const float * const * weight, int n) {
    Lanes acc[H][T];
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) {
            acc[h][t] = load_f32(vkq[h] + d0 + t * W);
        }
    }
    for (int j = 0; j < n; ++j) {
        const ggml_fp16_t * r = row[j] + d0;
        Lanes x[T];
        for (int t = 0; t < T; ++t) {
            x[t] = load_f16(r + t * W);
        }
        for (int h = 0; h < H; ++h) {
            const Lanes w = splat(weight[h][j]);
            for (int t = 0; t < T; ++t) {
                acc[h][t] = fma(x[t], w, acc[h][t]);
            }
        }
    }
    for (int h = 0; h < H; ++h) {
        for (int t = 0; t < T; ++t) {
            store_f32(vkq[h] + d0 + t * W, acc[h][t]);
        }
    }
}

template <int H>
inline void add_values_all(float * const * vkq, int64_t DV, const ggml_fp16_t * const * row,
                           const float * const * weight, int n) {
    int64_t d0 = 0;
    for (; d0 + 4 * W <= DV; d0 += 4 * W) {
        add_values<4, H>(vkq, d0, row, weight, n);
    }
    for (; d0 < DV; d0 += W) {
        add_values<1, H>(vkq, d0, row, weight, n);
    }
}

// add_values_all for 1 to VALUE_HEADS heads.
inline void add_values_heads(int H, float * const * vkq, int64_t DV, const ggml_fp16_t * const * row,
                             const float * const * weight, int n) {
    switch (H) {
        case 1: add_values_all<1>(vkq, DV, row, weight, n); break;
        case 2: add_values_all<2>(vkq, DV, row, weight, n); break;
#if defined(__AVX512F__)
        case 3: add_values_all<3>(vkq, DV, row, weight, n); break;
        case 4: add_values_all<4>(vkq, DV, row, weight, n); break;
#endif
        default: break;
    }
}

#endif

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
        int64_t ic = from;
#if defined(__AVX2__)
        // Sixteen mask cells at a time: in a stream holding several
        // sequences most of a row's cells are −∞ (F16 0xFC00), and a run of
        // them is passed over in one compare (a scalar pass over ~5,000
        // cells a row and layer was 5% of the kernel's time with four
        // requests in chunk mode).
        if (row != nullptr) {
            const __m256i minus_inf = _mm256_set1_epi16((short) 0xFC00);
            for (; ic + 16 <= to; ic += 16) {
                const __m256i m16 = _mm256_loadu_si256((const __m256i *) (row + ic));
                if ((unsigned) _mm256_movemask_epi8(_mm256_cmpeq_epi16(m16, minus_inf)) == 0xFFFFFFFFu) {
                    continue;
                }
                keep(row, ic, ic + 16);
            }
        }
#endif
        keep(row, ic, to);
    }

    // Appends the cells of [from, to) that `row` leaves visible, with their
    // bias; without a mask row every cell is visible, with bias 0.
    void keep(const ggml_fp16_t * row, int64_t from, int64_t to) {
        for (int64_t ic = from; ic < to; ++ic) {
            const float m = row ? GGML_CPU_FP16_TO_FP32(row[ic]) : 0.0f;
            if (m != -INFINITY) {
                cells.push_back(ic);
                bias.push_back(m);
            }
        }
    }
};

// A thread's scratch, reached once per op (see Visible): the visible
// cells, and the heads' accumulators where ggml's work buffer has room for
// one.
struct Scratch {
    Visible visible;
    std::vector<float> vkq;
    std::vector<float> v32;
    std::vector<ggml_fp16_t> q16;
};

thread_local Scratch scratch_of_thread;

// Query heads of one row that go through one pass over the cells: at most
// this many.
constexpr int64_t MAX_HEADS = 16;

// Query heads [h0, h0 + n) of the row at position i1 of stream i3, which
// share a mask row. They go through the cells together, a block at a time:
// heads that read the same KV head widen each key row once for their
// scores (dot_rows8) and add each value row into their sums together
// (add_values), whose multiply-adds then run as independent chains; a pass
// per head ran one chain a head, 4 cycles a cell (docs/adr/0004-cpu-kernels.md,
// "The query heads of a row together").
struct Heads {
    int64_t i1, h0, n, i3;
};

// Whether query heads h and h + 1 of a row share their mask row.
bool same_mask(const Attention & a, int64_t h) {
    return a.mask == nullptr || h % a.mask->ne[2] == (h + 1) % a.mask->ne[2];
}

// Online softmax of each query head of `g` over share `part` of `parts` of
// the cells of [ic0, ic1) their mask row leaves visible: leaves head i's
// unnormalised sum of values in `vkq[i]` (F32, DV), its running max in
// `M[i]` and its sum of weights in `S[i]`. Every head's arithmetic is the
// one a pass of its own would do, in the same order: a head's result does
// not depend on which heads share its pass.
void attend_heads(const Attention & a, Scratch & scratch, Heads g, int64_t ic0, int64_t ic1, int64_t part,
                  int64_t parts, float * const * vkq, float * M, float * S) {
    const ggml_tensor * q = a.q;
    const ggml_tensor * k = a.k;
    const ggml_tensor * v = a.v;
    const int64_t nh = g.n;

    float slope[MAX_HEADS];
    const float * pq[MAX_HEADS];
    const char * k_base[MAX_HEADS];
    const char * v_base[MAX_HEADS];
    for (int64_t i = 0; i < nh; ++i) {
        const int64_t iq2 = g.h0 + i;
        const uint32_t h = (uint32_t) iq2;
        slope[i] = alibi_slope(a, h);
        pq[i] = (const float *) ((const char *) q->data + g.i1 * q->nb[1] + iq2 * q->nb[2] + g.i3 * q->nb[3]);
        k_base[i] = (const char *) k->data + (iq2 / a.rk2) * k->nb[2] + (g.i3 / a.rk3) * k->nb[3];
        v_base[i] = (const char *) v->data + (iq2 / a.rv2) * v->nb[2] + (g.i3 / a.rv3) * v->nb[3];
        std::memset(vkq[i], 0, a.DV * sizeof(float));
        M[i] = -INFINITY;
        S[i] = 0.0f;
    }

#if GB_ROWS_SIMD
    const bool simd = a.DK % W == 0 && a.DV % W == 0;
#else
    const bool simd = false;
#endif
    ggml_fp16_t * q16 = nullptr;
    float * v32 = nullptr;
    if (!simd) {
        scratch.q16.resize((size_t) (nh * a.DK));
        scratch.v32.resize((size_t) a.DV);
        q16 = scratch.q16.data();
        v32 = scratch.v32.data();
        for (int64_t i = 0; i < nh; ++i) {
            ggml_cpu_fp32_to_fp16(pq[i], q16 + i * a.DK, a.DK);
        }
    }

    float raw[MAX_HEADS][BLOCK + 8];
    float score[MAX_HEADS][BLOCK];
    float weight[MAX_HEADS][BLOCK];
    bool live[MAX_HEADS];

    Visible & visible = scratch.visible;
    visible.fill(mask_row(a, g.i1, g.h0, g.i3), ic0, ic1);
    const int64_t n_all = (int64_t) visible.cells.size();
    const int64_t first = n_all * part / parts;
    const int64_t n_visible = n_all * (part + 1) / parts - first;
    const int64_t * cells = visible.cells.data() + first;
    const float * bias = visible.bias.data() + first;
    for (int64_t b0 = 0; b0 < n_visible; b0 += BLOCK) {
        const int64_t b1 = std::min(b0 + BLOCK, n_visible);
        const int n = (int) (b1 - b0);
        const int64_t * cell = cells + b0;
#if GB_ROWS_SIMD
        if (simd) {
            // The block's raw dot products, eight rows at a time (the last
            // group padded with its last row); heads reading the same KV
            // head share the row pointers.
            const ggml_fp16_t * rows[BLOCK + 8];
            for (int64_t i = 0; i < nh;) {
                const char * rows_of = k_base[i];
                for (int j = 0; j < n; ++j) {
                    rows[j] = (const ggml_fp16_t *) (rows_of + cell[j] * k->nb[1]);
                }
                for (int j = n; j % 8 != 0; ++j) {
                    rows[j] = rows[n - 1];
                }
                int64_t run = 1;
                while (i + run < nh && k_base[i + run] == rows_of) {
                    ++run;
                }
                for (int64_t end = i + run; i < end;) {
                    const int64_t h = std::min(end - i, DOT_HEADS);
                    for (int j = 0; j < n; j += 8) {
                        const float * qs[3] = {pq[i], pq[i + h / 2], pq[i + h - 1]};
                        float * outs[3] = {raw[i] + j, raw[i + h / 2] + j, raw[i + h - 1] + j};
                        if (h == 3) {
                            dot_rows8<3>(rows + j, qs, a.DK, outs);
                        } else if (h == 2) {
                            dot_rows8<2>(rows + j, qs, a.DK, outs);
                        } else {
                            dot_rows8<1>(rows + j, qs, a.DK, outs);
                        }
                    }
                    i += h;
                }
            }
        }
#endif
        bool any_live = false;
        for (int64_t i = 0; i < nh; ++i) {
            float block_max = -INFINITY;
            int j0 = 0;
#if GB_ROWS_SIMD
            if (simd && a.softcap == 0.0f) {
                // The block's scores a vector at a time: scale, then the
                // mask's bias times the slope added in one multiply-add (as
                // the scalar loop below compiles), and the block's maximum;
                // the scalar loop's running maximum was a chain of dependent
                // instructions.
                const Lanes scale = splat(a.scale);
                const Lanes sl = splat(slope[i]);
                Lanes mx = splat(-INFINITY);
                for (; j0 + W <= n; j0 += W) {
                    const Lanes sv = fma(sl, load_f32(bias + b0 + j0), mul(load_f32(raw[i] + j0), scale));
                    store_f32(score[i] + j0, sv);
                    mx = max(mx, sv);
                }
                block_max = hmax(mx);
            }
#endif
            for (int j = j0; j < n; ++j) {
                float s;
#if GB_ROWS_SIMD
                if (simd) {
                    s = raw[i][j];
                } else
#endif
                {
                    const ggml_fp16_t * k_row = (const ggml_fp16_t *) (k_base[i] + cell[j] * k->nb[1]);
                    ggml_vec_dot_f16((int) a.DK, &s, 0, (ggml_fp16_t *) k_row, 0, q16 + i * a.DK, 0, 1);
                }
                s *= a.scale;
                if (a.softcap != 0.0f) {
                    s = a.softcap * std::tanh(s);
                }
#if defined(__FMA__) || defined(__AVX512F__)
                s = std::fma(slope[i], bias[b0 + j], s);  // as the vector loop above
#else
                s += slope[i] * bias[b0 + j];
#endif
                score[i][j] = s;
                block_max = std::max(block_max, s);
            }
            live[i] = block_max != -INFINITY;
            if (!live[i]) {
                continue;
            }
            any_live = true;
            if (block_max > M[i]) {
                if (M[i] != -INFINITY) {
                    const float ms = std::exp(M[i] - block_max);
                    ggml_vec_scale_f32((int) a.DV, vkq[i], ms);
                    S[i] *= ms;
                }
                M[i] = block_max;
            }
            S[i] += (float) ggml_vec_soft_max_f32(n, weight[i], score[i], M[i]);
        }
        if (!any_live) {
            continue;
        }
#if GB_ROWS_SIMD
        if (simd) {
            // Runs of up to VALUE_HEADS live heads that read the same value rows.
            const ggml_fp16_t * rows[BLOCK];
            const char * rows_of = nullptr;
            for (int64_t i = 0; i < nh;) {
                if (!live[i]) {
                    ++i;
                    continue;
                }
                if (v_base[i] != rows_of) {
                    rows_of = v_base[i];
                    for (int j = 0; j < n; ++j) {
                        rows[j] = (const ggml_fp16_t *) (rows_of + cell[j] * v->nb[1]);
                    }
                }
                float * acc[VALUE_HEADS];
                const float * w[VALUE_HEADS];
                int run = 0;
                for (; i < nh && run < VALUE_HEADS && live[i] && v_base[i] == rows_of; ++i, ++run) {
                    acc[run] = vkq[i];
                    w[run] = weight[i];
                }
                add_values_heads(run, acc, a.DV, rows, w, n);
            }
            continue;
        }
#endif
        for (int64_t i = 0; i < nh; ++i) {
            if (!live[i]) {
                continue;
            }
            for (int j = 0; j < n; ++j) {
                if (weight[i][j] == 0.0f) {
                    continue;
                }
                ggml_cpu_fp16_to_fp32((const ggml_fp16_t *) (v_base[i] + cell[j] * v->nb[1]), v32, a.DV);
                ggml_vec_mad_f32((int) a.DV, vkq[i], v32, weight[i][j]);
            }
        }
    }
}

// A query row: its position in the batch (i1), head (i2) and stream (i3).
struct Row {
    int64_t i1, i2, i3;
};

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

// Prompt rows (64 or more), in flash-attn-tiles.cpp.
bool glassbox_flash_attn_tiles_handle(const ggml_compute_params * params, const ggml_tensor * dst);
void glassbox_flash_attn_tiles(const ggml_compute_params * params, ggml_tensor * dst);

extern "C" void ggml_compute_forward_flash_attn_ext(const ggml_compute_params * params, ggml_tensor * dst) {
    if (glassbox_flash_attn_tiles_handle(params, dst)) {
        glassbox_flash_attn_tiles(params, dst);
        return;
    }
    if (!handled(params, dst)) {
        ggml_compute_forward_flash_attn_ext_upstream(params, dst);
        return;
    }
    Scratch & scratch = scratch_of_thread;
    scratch.visible.valid = false;
    const Attention a = attention_of(dst);
    const ggml_tensor * q = a.q;
    const int ith = params->ith;
    const int nth = params->nth;
    const int64_t nek1 = a.k->ne[1];
    const int64_t per_thread = a.DK + 2 * a.DV + (int64_t) CACHE_LINE_SIZE_F32;
    float M[MAX_HEADS];
    float S[MAX_HEADS];
    float * vkq[MAX_HEADS];

    // ggml's rule for splitting the cells rather than the rows.
    const bool split_kv = q->ne[1] == 1 && q->ne[3] == 1 && nek1 >= 512;
    if (!split_kv) {
        // (row, head) pairs, a thread's share in row order (see Visible);
        // within it, the consecutive heads of a row that read the same keys
        // and values go through one pass.
        const int64_t neq1 = q->ne[1];
        const int64_t neq2 = q->ne[2];
        const int64_t nr = neq1 * neq2 * q->ne[3];
        const int64_t dr = (nr + nth - 1) / nth;
        const int64_t jr0 = dr * ith;
        const int64_t jr1 = std::min(jr0 + dr, nr);
        scratch.vkq.resize((size_t) (MAX_HEADS * a.DV));
        for (int64_t i = 0; i < MAX_HEADS; ++i) {
            vkq[i] = scratch.vkq.data() + i * a.DV;
        }
        for (int64_t jr = jr0; jr < jr1;) {
            const int64_t i3 = jr / (neq1 * neq2);
            const int64_t i1 = (jr - i3 * neq1 * neq2) / neq2;
            const int64_t h0 = jr - i3 * neq1 * neq2 - i1 * neq2;
            int64_t n = 1;
            while (n < MAX_HEADS && jr + n < jr1 && h0 + n < neq2 && same_mask(a, h0 + n - 1)) {
                ++n;
            }
            attend_heads(a, scratch, Heads{i1, h0, n, i3}, 0, nek1, 0, 1, vkq, M, S);
            for (int64_t i = 0; i < n; ++i) {
                add_sink(a, h0 + i, vkq[i], M[i], S[i]);
                write_row(a, Row{i1, h0 + i, i3}, vkq[i], S[i]);
            }
            jr += n;
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
    for (int64_t h0 = 0; h0 < n_heads;) {
        int64_t n = 1;
        while (n < MAX_HEADS && h0 + n < n_heads && same_mask(a, h0 + n - 1)) {
            ++n;
        }
        for (int64_t i = 0; i < n; ++i) {
            vkq[i] = partials + ((h0 + i) * nth + ith) * partial_size + 2;
        }
        attend_heads(a, scratch, Heads{0, h0, n, 0}, 0, nek1, ith, nth, vkq, M, S);
        for (int64_t i = 0; i < n; ++i) {
            if (ith == 0) {
                add_sink(a, h0 + i, vkq[i], M[i], S[i]);
            }
            vkq[i][-2] = M[i];
            vkq[i][-1] = S[i];
        }
        h0 += n;
    }
    ggml_barrier(params->threadpool);
    float * merged = (float *) params->wdata + ith * per_thread;
    for (int64_t h = ith; h < n_heads; h += nth) {
        float Mh = -INFINITY;
        float Sh = 0.0f;
        std::memset(merged, 0, a.DV * sizeof(float));
        for (int64_t t = 0; t < nth; ++t) {
            const float * part = partials + (h * nth + t) * partial_size;
            if (part[1] == 0.0f) {
                continue;
            }
            const float M_new = std::max(Mh, part[0]);
            const float keep = std::exp(Mh - M_new);
            const float add = std::exp(part[0] - M_new);
            for (int64_t d = 0; d < a.DV; ++d) {
                merged[d] = merged[d] * keep + part[2 + d] * add;
            }
            Sh = Sh * keep + part[1] * add;
            Mh = M_new;
        }
        write_row(a, Row{0, h, 0}, merged, Sh);
    }
}
