# Included by CMake after each project() of the llama.cpp build
# (CMAKE_PROJECT_INCLUDE in .cargo/config.toml; llama-cpp-sys-2 hands every
# CMAKE_* variable to CMake). When the whole tree has been read, it
# force-includes amx-tile-config.h into ggml's AMX kernel library, and only
# there: built by GCC before 14, that library faults on its first tile load
# without it (docs/adr/0004-cpu-kernels.md, "AMX"). The other variants'
# flags are untouched, so their objects stay as they were.
include_guard(GLOBAL)
set_property(GLOBAL PROPERTY GLASSBOX_AMX_TILE_CONFIG_H "${CMAKE_CURRENT_LIST_DIR}/amx-tile-config.h")

function(glassbox_amx_tile_config)
  get_property(header GLOBAL PROPERTY GLASSBOX_AMX_TILE_CONFIG_H)
  # `ggml-cpu-sapphirerapids`: one variant of GGML_CPU_ALL_VARIANTS;
  # `ggml-cpu`: a build for one CPU (GGML_NATIVE on an AMX Xeon).
  foreach(target IN ITEMS ggml-cpu-sapphirerapids ggml-cpu)
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${header}>")
    endif()
  endforeach()
endfunction()

if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL glassbox_amx_tile_config)
endif()

# Every CPU variant of ggml (and a build for one CPU) gets Glassbox's
# kernels (crates/models/kernels/, docs/adr/0004-cpu-kernels.md):
#  - attention for a few query rows (flash-attn-rows.cpp) and for prompt rows
#    (flash-attn-tiles.cpp, reached through the former): in ops.cpp alone,
#    where ggml defines and declares it, ggml's own
#    `ggml_compute_forward_flash_attn_ext` is renamed `..._upstream`;
#  - quantised weights eight rows at a time (mul-mat-rows8.cpp): in tiled/tiled.cpp
#    alone, ggml's `ggml_compute_forward_mul_mat_tiled` (the first thing its
#    matrix product asks) is renamed `..._upstream`.
# Each kernel's file defines the name ggml's code calls and hands what it
# does not take to the renamed one. GGML_GLASSBOX_KERNELS in
# .cargo/config.toml makes cargo rebuild ggml when these files change.
set_property(GLOBAL PROPERTY GLASSBOX_KERNELS_DIR "${CMAKE_CURRENT_LIST_DIR}/../kernels")

function(glassbox_kernels)
  get_property(kernels GLOBAL PROPERTY GLASSBOX_KERNELS_DIR)
  set(ggml_src "${CMAKE_SOURCE_DIR}/ggml/src")
  if(NOT EXISTS "${ggml_src}/ggml-cpu/ops.cpp" OR NOT EXISTS "${ggml_src}/ggml-cpu/tiled/tiled.cpp")
    return()
  endif()
  get_property(targets DIRECTORY "${ggml_src}" PROPERTY BUILDSYSTEM_TARGETS)
  set(cpu_targets "")
  foreach(target IN LISTS targets)
    if(target MATCHES "^ggml-cpu(-[a-z0-9_]+)?$")
      target_sources(${target} PRIVATE "${kernels}/flash-attn-rows.cpp" "${kernels}/flash-attn-tiles.cpp"
        "${kernels}/mul-mat-rows8.cpp")
      list(APPEND cpu_targets ${target})
    endif()
  endforeach()
  if(cpu_targets)
    # Source properties belong to the directory that defines the targets
    # (ggml/src, all variants), so once is enough.
    list(GET cpu_targets 0 first)
    set_property(SOURCE "${ggml_src}/ggml-cpu/ops.cpp" TARGET_DIRECTORY ${first} APPEND PROPERTY
      COMPILE_DEFINITIONS "ggml_compute_forward_flash_attn_ext=ggml_compute_forward_flash_attn_ext_upstream")
    set_property(SOURCE "${ggml_src}/ggml-cpu/tiled/tiled.cpp" TARGET_DIRECTORY ${first} APPEND PROPERTY
      COMPILE_DEFINITIONS "ggml_compute_forward_mul_mat_tiled=ggml_compute_forward_mul_mat_tiled_upstream")
  endif()
endfunction()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL glassbox_kernels)
endif()
