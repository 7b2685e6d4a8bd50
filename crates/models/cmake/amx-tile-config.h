/* Force-included into the C++ files of ggml's AMX kernel library (see
 * project-include.cmake and docs/adr/0004-cpu-kernels.md, "AMX").
 *
 * GCC before 14 declares `_tile_loadconfig` with an asm operand of 8 bytes
 * (`"m" (*(const void **)config)`), so the compiler believes `ldtilecfg`
 * reads only the first 8 bytes of the 64-byte tile configuration and drops
 * the stores of the rows and column widths as dead. ggml's AMX matmul
 * builds its configuration on the stack and then faults on the first tile
 * load. The macro below states the whole 64 bytes as read. */
#ifndef GLASSBOX_AMX_TILE_CONFIG_H
#define GLASSBOX_AMX_TILE_CONFIG_H
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#undef _tile_loadconfig
#define _tile_loadconfig(config) \
    __asm__ volatile("ldtilecfg\t%X0" ::"m"(*(const unsigned char(*)[64])(config)))
#endif
/* The mark `glassbox_models::cpu` looks for before it loads the AMX variant:
 * a library built without this header keeps the fault, and is not loaded. */
__attribute__((used, retain)) static const char glassbox_amx_tile_config_mark[] =
    "glassbox: AMX tile configuration stated whole";
#endif
