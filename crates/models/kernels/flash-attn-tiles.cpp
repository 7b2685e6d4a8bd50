// Flash attention for prompt rows (64 or more query rows) with F16 keys and
// values: ggml's tiled algorithm, with its per-head overheads taken out.
// Compiled into every CPU variant of ggml beside flash-attn-rows.cpp, whose
// entry point hands such ops here (docs/adr/0004-cpu-kernels.md, "Prompt
// rows: keys packed once a KV head").
//
// ggml's kernel (`ggml_compute_forward_flash_attn_ext_tiled` in ops.cpp)
// takes a tile of 64 query rows of one head and, for each tile of 64 cells,
// converts the tile's mask from F16 and the cells' keys from F16 into a
// transposed F32 block one element at a time, then multiplies. For a
// grouped-query model every head of a KV head converts the same keys and
// every head the same mask: on rag-chat's prompts that packing cost more
// than the products (a quarter of a prompt's CPU went to attention, for 7% of
// its multiply-adds). Here a tile of query rows goes through the cells once
// for all heads that read the same KV head: the mask is converted once a
// tile of cells (once a head only where ALiBi scales it per head), the keys
// and values once a KV head, widened by ggml's vector conversion.
//
// Every head's products, softmax and sums are ggml's own (`simd_gemm`,
// `ggml_vec_soft_max_f32`, the same order), so the output is ggml's bit for
// bit: a row's result does not depend on which rows share its tile.

#include "ggml-cpu-impl.h"
#include "ggml-cpu.h"
#include "ops.h"
#include "vec.h"
#include "common.h"
#include "simd-gemm.h"
#include "flash-attn-common.h"

#if defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

using namespace glassbox_attention;

constexpr int64_t QT = ggml_fa_tile_config::Q;
constexpr int64_t KT = ggml_fa_tile_config::KV;
// Query heads that share one pass over the cells: at most this many.
constexpr int64_t MAX_GROUP = 8;

struct Scratch {
    std::vector<float> q;      // group × QT × DK: the heads' query tiles
    std::vector<float> vkq;    // group × QT × DV: their value sums
    std::vector<float> sm;     // group × 2 × QT: their softmax sums and maxima
    std::vector<float> kq;     // QT × KT: one head's scores
    std::vector<float> raw;    // QT × KT: the tile's mask, F32
    std::vector<float> mask;   // QT × KT: the mask times a head's ALiBi slope
    std::vector<float> keys;   // DK × KT: the cells' keys, transposed
    std::vector<float> values; // KT × DV: the cells' values
    std::vector<float> row;    // DK: one key row widened
};

thread_local Scratch tile_scratch;

// The largest of x[0..n): ggml_vec_max_f32's result (a maximum does not
// depend on the order it is taken in; a +0 / -0 tie changes no exponential
// below), in vector lanes where ggml's loop is a chain of scalar maxima
// (4 cycles a score: half the time of the kernel before this).
float row_max(const float * x, int64_t n) {
    int64_t i = 0;
    float m = -INFINITY;
#if defined(__AVX512F__)
    if (n >= 16) {
        __m512 acc = _mm512_loadu_ps(x);
        for (i = 16; i + 16 <= n; i += 16) {
            acc = _mm512_max_ps(acc, _mm512_loadu_ps(x + i));
        }
        m = _mm512_reduce_max_ps(acc);
    }
#elif defined(__AVX__)
    if (n >= 8) {
        __m256 acc = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8) {
            acc = _mm256_max_ps(acc, _mm256_loadu_ps(x + i));
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        m = _mm_cvtss_f32(h);
    }
#endif
    for (; i < n; ++i) {
        m = std::max(m, x[i]);
    }
    return m;
}

}  // namespace

// Whether the tiled path takes the op: what ggml's tiled kernel takes, with
// F16 keys and values.
bool glassbox_flash_attn_tiles_handle(const ggml_compute_params * params, const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3];
    const int32_t prec = dst->op_params[3];
    return !params->use_ref && (prec == GGML_PREC_DEFAULT || prec == GGML_PREC_F32) && q->type == GGML_TYPE_F32 &&
           k->type == GGML_TYPE_F16 && v->type == GGML_TYPE_F16 && q->ne[1] >= QT && q->nb[0] == sizeof(float) &&
           k->nb[0] == sizeof(ggml_fp16_t) && v->nb[0] == sizeof(ggml_fp16_t) && dst->nb[0] == sizeof(float) &&
           q->ne[0] == k->ne[0] && dst->ne[0] == v->ne[0] && (mask == nullptr || mask->type == GGML_TYPE_F16);
}

void glassbox_flash_attn_tiles(const ggml_compute_params * params, ggml_tensor * dst) {
    const Attention a = attention_of(dst);
    const ggml_tensor * q = a.q;
    const ggml_tensor * k = a.k;
    const ggml_tensor * v = a.v;
    const ggml_tensor * mask = a.mask;
    const int64_t DK = a.DK;
    const int64_t DV = a.DV;
    const int64_t N = q->ne[1];
    const int64_t n_head = q->ne[2];
    const int64_t nek1 = k->ne[1];
    const int64_t rk2 = a.rk2;
    const float softcap = a.softcap;

    // Heads that read the same keys, values and mask go through the cells
    // together; one mask for all heads unless ALiBi scales it per head.
    int64_t group = (rk2 == a.rv2 && (mask == nullptr || mask->ne[2] == 1)) ? std::min(rk2, MAX_GROUP) : 1;
    while (n_head % group != 0 || rk2 % group != 0) {
        --group;
    }
    const bool shared_mask = a.max_bias <= 0.0f;

    Scratch & s = tile_scratch;
    s.q.resize((size_t) (group * QT * DK));
    s.vkq.resize((size_t) (group * QT * DV));
    s.sm.resize((size_t) (group * 2 * QT));
    s.kq.resize((size_t) (QT * KT));
    s.raw.resize((size_t) (QT * KT));
    s.mask.resize((size_t) (QT * KT));
    s.keys.resize((size_t) (DK * KT));
    s.values.resize((size_t) (KT * DV));
    s.row.resize((size_t) DK);

    const int64_t n_tiles = (N + QT - 1) / QT;
    const int64_t n_groups = n_head / group;
    const int64_t n_units = q->ne[3] * n_tiles * n_groups;
    const int64_t ne1 = dst->ne[1];
    const int64_t ne2 = dst->ne[2];
    const size_t nb1 = dst->nb[1];

    for (int64_t u = params->ith; u < n_units; u += params->nth) {
        const int64_t iq3 = u / (n_tiles * n_groups);
        const int64_t tile = (u / n_groups) % n_tiles;
        const int64_t h0 = (u % n_groups) * group;
        const int64_t iq1 = tile * QT;
        const int64_t rows = std::min(QT, N - iq1);
        const int64_t ik2 = h0 / rk2;
        const int64_t ik3 = iq3 / a.rk3;
        const int64_t iv2 = h0 / a.rv2;
        const int64_t iv3 = iq3 / a.rv3;

        float slope[MAX_GROUP];
        for (int64_t g = 0; g < group; ++g) {
            slope[g] = alibi_slope(a, (uint32_t) (h0 + g));
            float * Q = s.q.data() + g * QT * DK;
            for (int64_t tq = 0; tq < rows; ++tq) {
                const float * pq = (const float *) ((const char *) q->data + (iq1 + tq) * q->nb[1] +
                                                    (h0 + g) * q->nb[2] + iq3 * q->nb[3]);
                std::memcpy(Q + tq * DK, pq, DK * sizeof(float));
            }
            std::memset(Q + rows * DK, 0, (QT - rows) * DK * sizeof(float));
            std::memset(s.vkq.data() + g * QT * DV, 0, QT * DV * sizeof(float));
            float * S = s.sm.data() + g * 2 * QT;
            float * M = S + QT;
            for (int64_t tq = 0; tq < QT; ++tq) {
                S[tq] = 0.0f;
                M[tq] = -INFINITY;
            }
        }

        for (int64_t ic = 0; ic < nek1; ic += KT) {
            const int64_t kv_tile = std::min(KT, nek1 - ic);

            // The tile's mask, F32, and whether it hides every cell.
            bool all_hidden = false;
            if (mask) {
                all_hidden = true;
                for (int64_t tq = 0; tq < rows; ++tq) {
                    const ggml_fp16_t * mp = mask_row(a, iq1 + tq, h0, iq3);
                    float * r = s.raw.data() + tq * KT;
                    ggml_cpu_fp16_to_fp32(mp + ic, r, kv_tile);
                    for (int64_t tk = kv_tile; tk < KT; ++tk) {
                        r[tk] = -INFINITY;
                    }
                    if (all_hidden) {
                        for (int64_t tk = 0; tk < kv_tile; ++tk) {
                            if (r[tk] != -INFINITY) {
                                all_hidden = false;
                                break;
                            }
                        }
                    }
                }
                // ggml skips a tile whose slope-scaled mask is -inf
                // everywhere: the same test for a positive slope.
                if (all_hidden && shared_mask) {
                    continue;
                }
            }

            // The cells' keys transposed (keys[dk][tk]) and their values,
            // zero past the cache's end.
            for (int64_t tk = 0; tk < KT; ++tk) {
                float * r = s.row.data();
                if (tk < kv_tile) {
                    const ggml_fp16_t * kr =
                        (const ggml_fp16_t *) ((const char *) k->data + (ic + tk) * k->nb[1] + ik2 * k->nb[2] +
                                               ik3 * k->nb[3]);
                    ggml_cpu_fp16_to_fp32(kr, r, DK);
                    const ggml_fp16_t * vr =
                        (const ggml_fp16_t *) ((const char *) v->data + (ic + tk) * v->nb[1] + iv2 * v->nb[2] +
                                               iv3 * v->nb[3]);
                    ggml_cpu_fp16_to_fp32(vr, s.values.data() + tk * DV, DV);
                } else {
                    std::memset(r, 0, DK * sizeof(float));
                    std::memset(s.values.data() + tk * DV, 0, DV * sizeof(float));
                }
                float * keys = s.keys.data() + tk;
                for (int64_t dk = 0; dk < DK; ++dk) {
                    keys[dk * KT] = r[dk];
                }
            }

            for (int64_t g = 0; g < group; ++g) {
                const float * mask32 = s.raw.data();
                if (mask && !shared_mask) {
                    bool hidden = true;
                    float * m = s.mask.data();
                    for (int64_t tq = 0; tq < rows; ++tq) {
                        for (int64_t tk = 0; tk < KT; ++tk) {
                            const float x = tk < kv_tile ? slope[g] * s.raw[tq * KT + tk] : -INFINITY;
                            m[tq * KT + tk] = x;
                            hidden = hidden && (tk >= kv_tile || x == -INFINITY);
                        }
                    }
                    if (hidden) {
                        continue;
                    }
                    mask32 = m;
                }
                float * KQ = s.kq.data();
                float * S = s.sm.data() + g * 2 * QT;
                float * M = S + QT;
                float * VKQ = s.vkq.data() + g * QT * DV;

                std::memset(KQ, 0, QT * KT * sizeof(float));
                simd_gemm(KQ, s.q.data() + g * QT * DK, s.keys.data(), QT, DK, KT);
                ggml_vec_scale_f32(QT * KT, KQ, a.scale);
                if (softcap != 0.0f) {
                    ggml_vec_tanh_f32(QT * KT, KQ, KQ);
                    ggml_vec_scale_f32(QT * KT, KQ, softcap);
                }
                if (kv_tile < KT) {
                    for (int64_t tq = 0; tq < QT; ++tq) {
                        for (int64_t tk = kv_tile; tk < KT; ++tk) {
                            KQ[tq * KT + tk] = -INFINITY;
                        }
                    }
                }
                if (mask) {
                    ggml_vec_add_f32(rows * KT, KQ, KQ, mask32);
                }

                bool skip[QT] = {};
                for (int64_t tq = 0; tq < QT; ++tq) {
                    float * kq_row = KQ + tq * KT;
                    const float tile_max = row_max(kq_row, KT);
                    if (tile_max == -INFINITY) {
                        skip[tq] = true;
                        continue;
                    }
                    const float m_old = M[tq];
                    const float m_new = fmaxf(m_old, tile_max);
                    if (m_new > m_old) {
                        const float ms = expf(m_old - m_new);
                        ggml_vec_scale_f32(DV, VKQ + tq * DV, ms);
                        S[tq] *= ms;
                    }
                    M[tq] = m_new;
                    S[tq] += ggml_vec_soft_max_f32(KT, kq_row, kq_row, m_new);
                }
                for (int64_t tq = 0; tq < QT; ++tq) {
                    if (skip[tq]) {
                        std::memset(KQ + tq * KT, 0, KT * sizeof(float));
                    }
                }
                simd_gemm(VKQ, KQ, s.values.data(), QT, KT, DV);
            }
        }

        for (int64_t g = 0; g < group; ++g) {
            const int64_t h = h0 + g;
            float * S = s.sm.data() + g * 2 * QT;
            float * M = S + QT;
            float * VKQ = s.vkq.data() + g * QT * DV;
            if (a.sinks) {
                const float sk = ((const float *) a.sinks->data)[h];
                for (int64_t tq = 0; tq < rows; ++tq) {
                    float ms = 1.0f;
                    float vs = 1.0f;
                    if (sk > M[tq]) {
                        ms = expf(M[tq] - sk);
                        ggml_vec_scale_f32(DV, VKQ + tq * DV, ms);
                    } else {
                        vs = expf(sk - M[tq]);
                    }
                    S[tq] = S[tq] * ms + vs;
                }
            }
            for (int64_t tq = 0; tq < rows; ++tq) {
                const float S_inv = S[tq] == 0.0f ? 0.0f : 1.0f / S[tq];
                ggml_vec_scale_f32(DV, VKQ + tq * DV, S_inv);
                const int64_t i1 = iq1 + tq;
                std::memcpy((char *) dst->data + (iq3 * ne2 * ne1 + h + i1 * ne1) * nb1, VKQ + tq * DV, nb1);
            }
        }
    }
}
