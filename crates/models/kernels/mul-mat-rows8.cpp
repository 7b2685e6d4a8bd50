// Matrix products with Q4_1 and Q8_0 weights, eight weight rows at a time,
// for x86 CPUs off ggml's AMX path; compiled into every CPU variant of ggml
// (crates/models/cmake/project-include.cmake; docs/adr/0004-cpu-kernels.md,
// "Quantised weights eight rows at a time").
//
// ggml computes these one (weight row, token) pair at a time
// (`ggml_vec_dot_q4_1_q8_1`, `ggml_vec_dot_q8_0_q8_0`): per block of 32
// weights it widens them, multiplies them with the token's 8-bit values,
// converts the sum to F32 and scales it. Nothing is shared between the tokens
// of a batch, so four decode streams cost four times one and a prompt's
// tokens cost the same each. With SmolLM2 (Q4_1 layers, a Q8_0 output head)
// on a CPU without AMX that was two thirds of a decode step.
//
// Here a weight tensor is laid out once, eight rows side by side (each row's
// 4-byte groups interleaved, its scales beside), the first time it is
// multiplied. Then one 8-lane integer multiply-add gives four products for
// eight rows at once, a block's scaling is one vector operation for eight
// rows, and the widened weights serve up to eight tokens (four without
// AVX-512's 32 vector registers). With VNNI a token's integer sum is split
// over as many accumulators as the registers allow, so the multiply-adds do
// not wait on one another. Same arithmetic as
// ggml's (the token quantised by ggml's own function, an exact integer dot
// per block, F32 scaling), summed in another order; a token's result does not
// depend on the other tokens of its batch (docs/adr/0006-batch-invariant-
// decoding.md).
//
// Taken: Q4_1 or Q8_0 weights of a model (a buffer marked as weights, not a
// view), F32 tokens, rows a multiple of 8, AVX2 + FMA + F16C. Everything
// else goes to ggml's own path (its tiled kernel, renamed in tiled.cpp by the
// CMake hook, then its per-pair dot products).

#include "ggml-backend.h"
#include "ggml-cpu-impl.h"
#include "ggml-cpu.h"
#include "simd-mappings.h"
#define GGML_COMMON_DECL_CPP
#include "ggml-common.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

// ggml's own function, renamed in tiled/tiled.cpp (see above).
extern "C" bool ggml_compute_forward_mul_mat_tiled_upstream(const ggml_compute_params * params, ggml_tensor * dst);

// The mark a test looks for in every CPU variant library.
__attribute__((used, retain)) static const char glassbox_mul_mat_rows8_mark[] =
    "glassbox: quantised weights eight rows at a time";

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define GB_ROWS8_SIMD 1
#else
#define GB_ROWS8_SIMD 0
#endif

#if GB_ROWS8_SIMD
namespace {

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define GB_VNNI 1
inline __m256i dot4(__m256i acc, __m256i w, __m256i a) { return _mm256_dpbusd_epi32(acc, w, a); }
#elif defined(__AVXVNNI__)
#define GB_VNNI 1
inline __m256i dot4(__m256i acc, __m256i w, __m256i a) { return _mm256_dpbusd_avx_epi32(acc, w, a); }
#else
#define GB_VNNI 0
#endif

// With AVX-512's 32 vector registers beside the eight weight vectors: a pass
// over a group's weights serves eight tokens (each needs its own sums), and
// with VNNI a token's integer sum may take eight accumulators a pass (so many
// multiply-add chains in flight). With 16 registers: four tokens, four.
#if defined(__AVX512VL__)
#define PASS_TOKENS 8
constexpr int DOT_REGISTERS = 8;
#else
#define PASS_TOKENS 4
constexpr int DOT_REGISTERS = 4;
#endif
// Integer accumulators per token when a pass serves C tokens.
template <int C>
constexpr int DOT_CHAINS = DOT_REGISTERS / C > 1 ? DOT_REGISTERS / C : 1;

// One block of 32 weights for eight rows, as many bytes as in the GGUF
// file (decode streams the weights from memory where they do not fit in the
// cache). Q4_1: the rows' scales and minimums (F16), then four 32-byte
// chunks; chunk t holds bytes 4t..4t+3 of each row's `qs` (row i at bytes
// 4i..4i+3), so its low nibbles are weights 4t..4t+3 of the eight rows and
// its high nibbles 16+4t..16+4t+3.
struct GroupQ4_1 {
    ggml_fp16_t d[8];
    ggml_fp16_t m[8];
    uint8_t qs[128];
};
static_assert(sizeof(GroupQ4_1) == 160, "packed block");

// Q8_0: the scales (F16), then eight 32-byte chunks; chunk u holds weights
// 4u..4u+3 of each row (row i at bytes 4i..4i+3). With VNNI they are stored
// plus 128 (unsigned, as the instruction wants them); the token's sum times
// 128 is taken off again with the block's scale.
struct GroupQ8_0 {
    ggml_fp16_t d[8];
    uint8_t qs[256];
};
static_assert(sizeof(GroupQ8_0) == 272, "packed block");

size_t group_bytes(ggml_type type) { return type == GGML_TYPE_Q4_1 ? sizeof(GroupQ4_1) : sizeof(GroupQ8_0); }

// A weight tensor laid out in groups of eight rows, or the decision not to
// (`blocks` null: over the memory cap).
struct Pack {
    const void * data = nullptr;
    size_t bytes = 0;
    ggml_type type = GGML_TYPE_COUNT;
    int64_t rows = 0;
    int64_t cols = 0;
    uint64_t print = 0;
    size_t packed = 0;
    uint8_t * blocks = nullptr;
    ~Pack() { std::free(blocks); }
};

// Packed copies are kept for a tensor as long as it lives, to this many
// bytes in all; past it, tensors keep ggml's path (GLASSBOX_ROWS8_PACK_MB).
size_t pack_cap() {
    static const size_t cap = [] {
        const char * env = std::getenv("GLASSBOX_ROWS8_PACK_MB");
        long mb = env ? std::strtol(env, nullptr, 10) : 4096;
        return (size_t) (mb < 0 ? 0 : mb) << 20;
    }();
    return cap;
}

// The first and last 64 bytes of the tensor's data (two cache lines a
// product): a tensor freed and another loaded at the same addresses with
// the same shape is not taken for the old one.
uint64_t fingerprint(const ggml_tensor * t) {
    const size_t n = ggml_nbytes(t);
    const uint8_t * p = (const uint8_t *) t->data;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++) {
        uint64_t w;
        std::memcpy(&w, p + (i < 8 ? 8 * i : n - 8 * (i - 7)), 8);
        h = (h ^ w) * 1099511628211ull;
    }
    return h;
}

bool same(const Pack & p, const ggml_tensor * t, uint64_t print) {
    return p.data == t->data && p.type == t->type && p.rows == t->ne[1] && p.cols == t->ne[0] && p.print == print;
}

std::mutex packs_mu;
std::unordered_map<const ggml_tensor *, std::shared_ptr<const Pack>> packs;
size_t packs_bytes = 0;

void pack_rows(const ggml_tensor * t, Pack & p) {
    const int64_t nb = p.cols / 32;
    for (int64_t g = 0; g < p.rows / 8; g++) {
        for (int64_t b = 0; b < nb; b++) {
            uint8_t * at = p.blocks + (g * nb + b) * group_bytes(p.type);
            for (int i = 0; i < 8; i++) {
                const char * row = (const char *) t->data + (8 * g + i) * t->nb[1];
                if (p.type == GGML_TYPE_Q4_1) {
                    GroupQ4_1 & out = *(GroupQ4_1 *) at;
                    const block_q4_1 & in = ((const block_q4_1 *) row)[b];
                    out.d[i] = in.GGML_COMMON_AGGR_U.GGML_COMMON_AGGR_S.d;
                    out.m[i] = in.GGML_COMMON_AGGR_U.GGML_COMMON_AGGR_S.m;
                    for (int c = 0; c < 4; c++) {
                        std::memcpy(out.qs + 32 * c + 4 * i, in.qs + 4 * c, 4);
                    }
                } else {
                    GroupQ8_0 & out = *(GroupQ8_0 *) at;
                    const block_q8_0 & in = ((const block_q8_0 *) row)[b];
                    out.d[i] = in.d;
                    for (int c = 0; c < 8; c++) {
                        for (int j = 0; j < 4; j++) {
                            out.qs[32 * c + 4 * i + j] = (uint8_t) (in.qs[4 * c + j] + (GB_VNNI ? 128 : 0));
                        }
                    }
                }
            }
        }
    }
}

// The tensor's packed copy (made on first use), or null where it stays on
// ggml's path. The decision is kept with the tensor, so every thread of an
// operation gets the same answer.
std::shared_ptr<const Pack> pack_for(const ggml_tensor * t) {
    const uint64_t print = fingerprint(t);
    const size_t bytes = ggml_nbytes(t);
    std::lock_guard<std::mutex> lock(packs_mu);
    auto it = packs.find(t);
    if (it != packs.end() && same(*it->second, t, print)) {
        return it->second->blocks ? it->second : nullptr;
    }
    // Entries whose tensor is gone: the same tensor address with other
    // contents, or data where this tensor's data now lies.
    const char * lo = (const char *) t->data;
    for (auto e = packs.begin(); e != packs.end();) {
        const char * elo = (const char *) e->second->data;
        if (e->first == t || (elo < lo + bytes && lo < elo + e->second->bytes)) {
            packs_bytes -= e->second->packed;
            e = packs.erase(e);
        } else {
            ++e;
        }
    }
    auto p = std::make_shared<Pack>();
    p->data = t->data;
    p->bytes = bytes;
    p->type = t->type;
    p->rows = t->ne[1];
    p->cols = t->ne[0];
    p->print = print;
    const size_t packed = (size_t) (p->rows / 8) * (size_t) (p->cols / 32) * group_bytes(t->type);
    if (packs_bytes + packed <= pack_cap()) {
        p->blocks = (uint8_t *) std::aligned_alloc(64, (packed + 63) / 64 * 64);
        if (p->blocks) {
            pack_rows(t, *p);
            p->packed = packed;
            packs_bytes += packed;
        }
    }
    packs[t] = p;
    return p->blocks ? std::shared_ptr<const Pack>(p) : nullptr;
}

inline __m256i splat4(const int8_t * q) {
    int32_t v;
    std::memcpy(&v, q, 4);
    return _mm256_set1_epi32(v);
}

// Eight rows (one group) times C tokens. `a[c]` are the tokens' quantised
// rows (Q8_1 for Q4_1 weights, Q8_0 for Q8_0), `ds[c]` per block the scale
// of the token and the factor of the block's second term (Q4_1: the token's
// scaled sum, times the rows' minimums; Q8_0 with VNNI: −128 times that, times
// the rows' scales), `out[c]` where the eight results go.
template <ggml_type T, int C>
void group_times(const uint8_t * g, int64_t nb, const char * const * a, const float * const * ds,
                 float * const * out) {
    constexpr size_t a_bytes = T == GGML_TYPE_Q4_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    constexpr size_t a_head = a_bytes - 32;
    constexpr bool second = T == GGML_TYPE_Q4_1 || GB_VNNI;
    __m256 acc[C];
    for (int c = 0; c < C; c++) {
        acc[c] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        __m256 d8;
        __m256 s8;
        __m256i w[8];
        if constexpr (T == GGML_TYPE_Q4_1) {
            const GroupQ4_1 & blk = ((const GroupQ4_1 *) g)[b];
            d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) blk.d));
            s8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) blk.m));
            const __m256i low = _mm256_set1_epi8(0x0F);
            for (int t = 0; t < 4; t++) {
                const __m256i x = _mm256_loadu_si256((const __m256i *) (blk.qs + 32 * t));
                w[t] = _mm256_and_si256(x, low);
                w[4 + t] = _mm256_and_si256(_mm256_srli_epi16(x, 4), low);
            }
        } else {
            const GroupQ8_0 & blk = ((const GroupQ8_0 *) g)[b];
            d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) blk.d));
            s8 = d8;
            for (int u = 0; u < 8; u++) {
                w[u] = _mm256_loadu_si256((const __m256i *) (blk.qs + 32 * u));
            }
        }
        const int8_t * q[C];
        for (int c = 0; c < C; c++) {
            q[c] = (const int8_t *) (a[c] + b * a_bytes + a_head);
        }
#if GB_VNNI
        // Each token's integer sum in DOT_CHAINS<C> parts: the multiply-adds
        // no longer wait on one another (an instruction's latency is several
        // of its issue slots). Integer sums, so the total is the same.
        constexpr int K = DOT_CHAINS<C>;
        __m256i part[C][K];
        for (int c = 0; c < C; c++) {
            for (int k = 0; k < K; k++) {
                part[c][k] = _mm256_setzero_si256();
            }
        }
        for (int u = 0; u < 8; u++) {
            for (int c = 0; c < C; c++) {
                part[c][u % K] = dot4(part[c][u % K], w[u], splat4(q[c] + 4 * u));
            }
        }
#endif
        for (int c = 0; c < C; c++) {
            __m256i dot;
#if GB_VNNI
            for (int n = K; n > 1; n = (n + 1) / 2) {
                for (int i = 0; i + (n + 1) / 2 < n; i++) {
                    part[c][i] = _mm256_add_epi32(part[c][i], part[c][i + (n + 1) / 2]);
                }
            }
            dot = part[c][0];
#else
            if constexpr (T == GGML_TYPE_Q4_1) {
                // Sums of pairs in 16 bits: at most 8 × 2 × 15 × 127 = 30480.
                __m256i pairs = _mm256_maddubs_epi16(w[0], splat4(q[c]));
                for (int u = 1; u < 8; u++) {
                    pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(w[u], splat4(q[c] + 4 * u)));
                }
                dot = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
            } else {
                // Signed times signed: |w| times the token's value with w's sign.
                dot = _mm256_setzero_si256();
                for (int u = 0; u < 8; u++) {
                    const __m256i pairs =
                        _mm256_maddubs_epi16(_mm256_abs_epi8(w[u]), _mm256_sign_epi8(splat4(q[c] + 4 * u), w[u]));
                    dot = _mm256_add_epi32(dot, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
                }
            }
#endif
            const __m256 scale = _mm256_mul_ps(d8, _mm256_set1_ps(ds[c][2 * b]));
            acc[c] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[c]);
            if constexpr (second) {
                acc[c] = _mm256_fmadd_ps(s8, _mm256_set1_ps(ds[c][2 * b + 1]), acc[c]);
            }
        }
    }
    for (int c = 0; c < C; c++) {
        _mm256_storeu_ps(out[c], acc[c]);
    }
}

template <ggml_type T>
void group_times_n(int n, const uint8_t * g, int64_t nb, const char * const * a, const float * const * ds,
                   float * const * out) {
    switch (n) {
#if PASS_TOKENS == 8
        case 8: group_times<T, 8>(g, nb, a, ds, out); break;
        case 7: group_times<T, 7>(g, nb, a, ds, out); break;
        case 6: group_times<T, 6>(g, nb, a, ds, out); break;
        case 5: group_times<T, 5>(g, nb, a, ds, out); break;
#endif
        case 4: group_times<T, 4>(g, nb, a, ds, out); break;
        case 3: group_times<T, 3>(g, nb, a, ds, out); break;
        case 2: group_times<T, 2>(g, nb, a, ds, out); break;
        default: group_times<T, 1>(g, nb, a, ds, out); break;
    }
}

bool takes(const ggml_compute_params * params, const ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    return !params->use_ref && (src0->type == GGML_TYPE_Q4_1 || src0->type == GGML_TYPE_Q8_0) &&
           src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && src0->view_src == nullptr &&
           src0->buffer != nullptr &&
           ggml_backend_buffer_get_usage(src0->buffer) == GGML_BACKEND_BUFFER_USAGE_WEIGHTS &&
           ggml_is_contiguous(src0) && src0->ne[2] == 1 && src0->ne[3] == 1 && src0->ne[1] % 8 == 0 &&
           src0->ne[0] % 32 == 0 && src1->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) &&
           src1->ne[0] == src0->ne[0];
}

}  // namespace

static bool glassbox_mul_mat_rows8(const ggml_compute_params * params, ggml_tensor * dst) {
    if (!takes(params, dst)) {
        return false;
    }
    const std::shared_ptr<const Pack> pack = pack_for(dst->src[0]);
    if (!pack) {
        return false;
    }
    const ggml_tensor * src1 = dst->src[1];
    const ggml_type type = pack->type;
    const ggml_type a_type = ggml_get_type_traits_cpu(type)->vec_dot_type;  // Q8_1 or Q8_0
    const int ith = params->ith;
    const int nth = params->nth;
    const int64_t k = src1->ne[0];
    const int64_t nb = k / 32;
    const int64_t ne11 = src1->ne[1];
    const int64_t ne12 = src1->ne[2];
    const int64_t tokens = ne11 * ne12 * src1->ne[3];
    const size_t row_size = ggml_row_size(a_type, k);
    const size_t a_bytes = ggml_type_size(a_type);
    char * wdata = (char *) params->wdata;
    GGML_ASSERT(params->wsize >= (size_t) tokens * row_size);

    // The tokens quantised by ggml's own function, each thread a share of
    // every token's blocks, as ggml's path does.
    const ggml_from_float_t from_float = ggml_get_type_traits_cpu(a_type)->from_float;
    const int64_t b0 = ith * nb / nth;
    const int64_t b1 = (ith + 1) * nb / nth;
    for (int64_t j = 0; j < tokens && b1 > b0; j++) {
        const int64_t i13 = j / (ne11 * ne12);
        const int64_t i12 = j / ne11 % ne12;
        const int64_t i11 = j % ne11;
        const float * x = (const float *) ((const char *) src1->data + i11 * src1->nb[1] + i12 * src1->nb[2] +
                                           i13 * src1->nb[3]);
        from_float(x + b0 * 32, wdata + j * row_size + b0 * a_bytes, (b1 - b0) * 32);
    }
    ggml_barrier(params->threadpool);

    // Each thread: a share of the row groups, against every token.
    const int64_t groups = pack->rows / 8;
    const int64_t g0 = ith * groups / nth;
    const int64_t g1 = (ith + 1) * groups / nth;
    if (g0 >= g1) {
        return true;
    }
    // Per token and block: its scale, and the factor of the second term.
    thread_local std::vector<float> scales_tls;
    std::vector<float> & scales = scales_tls;
    scales.resize((size_t) (tokens * nb * 2));
    float * sc = scales.data();
    for (int64_t j = 0; j < tokens; j++) {
        const char * row = wdata + j * row_size;
        for (int64_t b = 0; b < nb; b++) {
            if (type == GGML_TYPE_Q4_1) {
                const block_q8_1 & blk = ((const block_q8_1 *) row)[b];
                sc[(j * nb + b) * 2] = GGML_CPU_FP16_TO_FP32(blk.GGML_COMMON_AGGR_U.GGML_COMMON_AGGR_S.d);
                sc[(j * nb + b) * 2 + 1] = GGML_CPU_FP16_TO_FP32(blk.GGML_COMMON_AGGR_U.GGML_COMMON_AGGR_S.s);
            } else {
                const block_q8_0 & blk = ((const block_q8_0 *) row)[b];
                const float d = GGML_CPU_FP16_TO_FP32(blk.d);
                int sum = 0;
                for (int i = 0; i < 32; i++) {
                    sum += blk.qs[i];
                }
                sc[(j * nb + b) * 2] = d;
                sc[(j * nb + b) * 2 + 1] = -128.0f * d * (float) sum;
            }
        }
    }
    const size_t gbytes = group_bytes(type);
    for (int64_t g = g0; g < g1; g++) {
        const uint8_t * grp = pack->blocks + g * nb * gbytes;
        for (int64_t j0 = 0; j0 < tokens; j0 += PASS_TOKENS) {
            const int n = (int) std::min<int64_t>(PASS_TOKENS, tokens - j0);
            const char * a[PASS_TOKENS];
            const float * ds[PASS_TOKENS];
            float * out[PASS_TOKENS];
            for (int c = 0; c < n; c++) {
                const int64_t j = j0 + c;
                a[c] = wdata + j * row_size;
                ds[c] = sc + j * nb * 2;
                const int64_t i13 = j / (ne11 * ne12);
                const int64_t i12 = j / ne11 % ne12;
                const int64_t i11 = j % ne11;
                out[c] = (float *) ((char *) dst->data + i11 * dst->nb[1] + i12 * dst->nb[2] + i13 * dst->nb[3]) +
                         8 * g;
            }
            if (type == GGML_TYPE_Q4_1) {
                group_times_n<GGML_TYPE_Q4_1>(n, grp, nb, a, ds, out);
            } else {
                group_times_n<GGML_TYPE_Q8_0>(n, grp, nb, a, ds, out);
            }
        }
    }
    return true;
}
#endif  // GB_ROWS8_SIMD

// Whether `t` has a packed copy here, i.e. its products ran on this kernel
// (a test asks, for its own tensor).
extern "C" __attribute__((visibility("default"))) int glassbox_mul_mat_rows8_packed(const ggml_tensor * t) {
#if GB_ROWS8_SIMD
    const uint64_t print = fingerprint(t);
    std::lock_guard<std::mutex> lock(packs_mu);
    auto it = packs.find(t);
    return it != packs.end() && same(*it->second, t, print) && it->second->blocks != nullptr;
#else
    (void) t;
    return 0;
#endif
}

extern "C" bool ggml_compute_forward_mul_mat_tiled(const ggml_compute_params * params, ggml_tensor * dst) {
#if GB_ROWS8_SIMD
    if (glassbox_mul_mat_rows8(params, dst)) {
        return true;
    }
#endif
    return ggml_compute_forward_mul_mat_tiled_upstream(params, dst);
}
