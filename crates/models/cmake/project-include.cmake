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
