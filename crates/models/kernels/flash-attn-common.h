// What Glassbox's two attention kernels (flash-attn-rows.cpp, flash-attn-tiles.cpp)
// read off a FLASH_ATTN_EXT op the same way: its tensors, broadcast factors,
// scale, soft-capping and ALiBi slopes, and a query row's mask row.
#pragma once

#include "ggml.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace glassbox_attention {

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

inline Attention attention_of(ggml_tensor * dst) {
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

// Head h's ALiBi slope (1 without ALiBi), as ggml computes it.
inline float alibi_slope(const Attention & a, uint32_t h) {
    if (a.max_bias <= 0.0f) {
        return 1.0f;
    }
    return h < a.n_head_log2 ? std::pow(a.m0, (float) (h + 1)) : std::pow(a.m1, (float) (2 * (h - a.n_head_log2) + 1));
}

// The mask row of query row (i1, head, i3), or null.
inline const ggml_fp16_t * mask_row(const Attention & a, int64_t i1, int64_t head, int64_t i3) {
    if (a.mask == nullptr) {
        return nullptr;
    }
    return (const ggml_fp16_t *) ((const char *) a.mask->data + i1 * a.mask->nb[1] +
                                  (head % a.mask->ne[2]) * a.mask->nb[2] + (i3 % a.mask->ne[3]) * a.mask->nb[3]);
}

}  // namespace glassbox_attention
