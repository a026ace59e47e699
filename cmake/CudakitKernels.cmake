# Kernels for tests, examples, benchmarks and the doctor: compiled at build time with
# nvcc and embedded in the binaries, so nothing is looked up on disk at run time.
#
#   cudakit_add_kernels(<target> <name> <source.cu>)
#
# makes an object library <target> holding three images of <source.cu>, each compiled
# once and linked into every binary that uses it:
#   fatbin  machine code for every architecture of CUDAKIT_KERNEL_ARCHS, and PTX for the
#           first architecture of each major generation among them and for the newest,
#           uncompressed, so that cudakit reads each kernel's parameter layout from the
#           image (docs/launch.md) instead of asking the driver. A GPU runs its own machine code; a GPU newer than the list
#           JIT-compiles the newest PTX; under CUDA_FORCE_PTX_JIT=1 the driver JIT-compiles
#           the PTX of the GPU's own generation, so code that needs that generation's
#           features (clusters from sm_90) keeps them.
#   cubin   machine code for CUDAKIT_KERNEL_ARCH only (the single-architecture test image)
#   ptx     PTX for the oldest architecture of the list (every supported GPU can JIT it),
#           NUL-terminated
# and a header <name>_kernels.hpp (on the target's include path) declaring
#   std::span<const unsigned char> cudakit_kernels::<name>_fatbin(), _cubin(), _ptx()
#   cudakit_kernels::<name>_machine_code_architectures, _ptx_architectures (arrays of ints,
#   90 for sm_90) and <name>_cubin_architecture: what the images hold, for tests.
enable_language(ASM)
find_program(CUDAKIT_NVCC nvcc HINTS ${CUDAToolkit_BIN_DIR} /usr/local/cuda/bin REQUIRED)
set(CUDAKIT_KERNEL_ARCHS all CACHE STRING
    "Architectures the embedded kernels carry machine code for: 'all' (every sm_XY this nvcc lists), 'present' (the \
GPUs of this machine, else the newest this nvcc lists) or a list such as '80;90'")
set(CUDAKIT_KERNEL_ARCH 90 CACHE STRING "Architecture of the single-architecture test cubin")

# Every architecture this nvcc compiles machine code for, as sorted numbers (75;...;121).
function(cudakit_nvcc_architectures out)
  execute_process(COMMAND ${CUDAKIT_NVCC} --list-gpu-code OUTPUT_VARIABLE listed RESULT_VARIABLE r)
  if(r)
    message(FATAL_ERROR "${CUDAKIT_NVCC} --list-gpu-code failed (${r}); set CUDAKIT_KERNEL_ARCHS to a list such as 80;90")
  endif()
  string(REGEX MATCHALL "sm_[0-9]+\n" codes "${listed}\n")  # sm_90a and sm_100f are not portable
  set(archs "")
  foreach(code IN LISTS codes)
    string(REGEX REPLACE "sm_([0-9]+)\n" "\\1" number "${code}")
    list(APPEND archs ${number})
  endforeach()
  list(SORT archs COMPARE NATURAL)
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# The architectures of this machine's GPUs that nvcc supports (nvidia-smi's compute
# capabilities); where there is none, the newest nvcc supports, whose PTX any newer GPU
# JIT-compiles. `make doctor` builds this way: one architecture instead of a dozen.
function(cudakit_present_architectures out)
  cudakit_nvcc_architectures(supported)
  set(archs "")
  find_program(CUDAKIT_NVIDIA_SMI nvidia-smi)
  if(CUDAKIT_NVIDIA_SMI)
    execute_process(COMMAND ${CUDAKIT_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE listed RESULT_VARIABLE r ERROR_QUIET)
    if(r EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" capabilities "${listed}")
      foreach(capability IN LISTS capabilities)
        string(REPLACE "." "" number "${capability}")
        if(number IN_LIST supported)
          list(APPEND archs ${number})
        endif()
      endforeach()
    endif()
  endif()
  if(archs)
    message(STATUS "cudakit kernels: this machine's GPUs are ${archs}")
  else()
    list(GET supported -1 archs)
    message(STATUS "cudakit kernels: no GPU found; the newest architecture (${archs}), whose PTX newer GPUs JIT-compile")
  endif()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# The architectures as sorted numbers (75;80;...;121) in `out`.
function(cudakit_kernel_architectures out)
  if(CUDAKIT_KERNEL_ARCHS STREQUAL "all")
    cudakit_nvcc_architectures(archs)
  elseif(CUDAKIT_KERNEL_ARCHS STREQUAL "present")
    cudakit_present_architectures(archs)
  else()
    set(archs ${CUDAKIT_KERNEL_ARCHS})
  endif()
  list(REMOVE_DUPLICATES archs)
  list(SORT archs COMPARE NATURAL)
  if(NOT archs)
    message(FATAL_ERROR "no kernel architectures: CUDAKIT_KERNEL_ARCHS is '${CUDAKIT_KERNEL_ARCHS}'")
  endif()
  set(${out} ${archs} PARENT_SCOPE)
endfunction()

# PTX targets for `archs`: the first of each major generation, and the newest.
function(cudakit_ptx_architectures out archs)
  set(ptx "")
  set(last_major "")
  foreach(arch IN LISTS archs)
    math(EXPR major "${arch} / 10")
    if(NOT major STREQUAL last_major)
      list(APPEND ptx ${arch})
      set(last_major ${major})
    endif()
  endforeach()
  list(GET archs -1 newest)
  list(APPEND ptx ${newest})
  list(REMOVE_DUPLICATES ptx)
  set(${out} ${ptx} PARENT_SCOPE)
endfunction()

cudakit_kernel_architectures(CUDAKIT_KERNEL_ARCH_LIST)
cudakit_ptx_architectures(CUDAKIT_KERNEL_PTX_LIST "${CUDAKIT_KERNEL_ARCH_LIST}")
list(GET CUDAKIT_KERNEL_ARCH_LIST 0 CUDAKIT_KERNEL_OLDEST_ARCH)
message(STATUS "cudakit kernels: machine code for ${CUDAKIT_KERNEL_ARCH_LIST}; PTX for ${CUDAKIT_KERNEL_PTX_LIST}")

function(cudakit_add_kernels target name source)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/${source})
  # The headers beside the source, which it may include: a change to one rebuilds the images.
  file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name})
  set(common -std=c++17 -O3 -lineinfo -ccbin ${CMAKE_CXX_COMPILER})
  set(gencode "")
  foreach(arch IN LISTS CUDAKIT_KERNEL_ARCH_LIST)
    list(APPEND gencode -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  foreach(arch IN LISTS CUDAKIT_KERNEL_PTX_LIST)
    list(APPEND gencode -gencode arch=compute_${arch},code=compute_${arch})
  endforeach()
  string(REPLACE ";" " " arch_words "${CUDAKIT_KERNEL_ARCH_LIST}")
  set(uncompressed "")
  if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.8)
    set(uncompressed --compress-mode=none)  # the default compresses large fatbins
  endif()
  add_custom_command(OUTPUT ${out}.fatbin
    COMMAND ${CUDAKIT_NVCC} ${common} --fatbin ${gencode} ${uncompressed} -o ${out}.fatbin ${src}
    DEPENDS ${src} ${headers} COMMENT "nvcc: ${name}.fatbin (${arch_words})" VERBATIM)
  add_custom_command(OUTPUT ${out}.cubin
    COMMAND ${CUDAKIT_NVCC} ${common} --cubin -arch=sm_${CUDAKIT_KERNEL_ARCH} -o ${out}.cubin ${src}
    DEPENDS ${src} ${headers} COMMENT "nvcc: ${name}.cubin" VERBATIM)
  add_custom_command(OUTPUT ${out}.ptx
    COMMAND ${CUDAKIT_NVCC} ${common} --ptx -arch=compute_${CUDAKIT_KERNEL_OLDEST_ARCH} -o ${out}.ptx ${src}
    DEPENDS ${src} ${headers} COMMENT "nvcc: ${name}.ptx" VERBATIM)

  set(asm "")
  foreach(kind fatbin cubin ptx)
    string(APPEND asm
      "  .section .rodata\n  .balign 16\n  .global cudakit_embedded_${name}_${kind}\n"
      "cudakit_embedded_${name}_${kind}:\n  .incbin \"${out}.${kind}\"\n"
      "  .global cudakit_embedded_${name}_${kind}_end\ncudakit_embedded_${name}_${kind}_end:\n  .byte 0\n")
  endforeach()
  string(APPEND asm "  .section .note.GNU-stack,\"\",@progbits\n")
  file(WRITE ${out}_embed.S "${asm}")
  set_source_files_properties(${out}_embed.S PROPERTIES OBJECT_DEPENDS "${out}.fatbin;${out}.cubin;${out}.ptx")

  set(hdr "// Generated by cudakit_add_kernels from ${source}: embedded kernel images.\n#pragma once\n#include <cstddef>\n#include <span>\n\n")
  foreach(kind fatbin cubin ptx)
    string(APPEND hdr "extern \"C\" const unsigned char cudakit_embedded_${name}_${kind}[];\n"
                      "extern \"C\" const unsigned char cudakit_embedded_${name}_${kind}_end[];\n")
  endforeach()
  string(APPEND hdr "\nnamespace cudakit_kernels {\n")
  foreach(kind fatbin cubin ptx)
    set(extra "")
    if(kind STREQUAL "ptx")
      set(extra " + 1")  # keep the terminating NUL the assembler appended
    endif()
    string(APPEND hdr "inline std::span<const unsigned char> ${name}_${kind}() {\n"
                      "  return {cudakit_embedded_${name}_${kind}, static_cast<std::size_t>(cudakit_embedded_${name}_${kind}_end - cudakit_embedded_${name}_${kind})${extra}};\n}\n")
  endforeach()
  string(REPLACE ";" ", " machine_code "${CUDAKIT_KERNEL_ARCH_LIST}")
  string(REPLACE ";" ", " ptx "${CUDAKIT_KERNEL_PTX_LIST}")
  string(APPEND hdr "// What the images hold (90 for sm_90 / compute_90).\n"
                    "inline constexpr int ${name}_machine_code_architectures[] = {${machine_code}};\n"
                    "inline constexpr int ${name}_ptx_architectures[] = {${ptx}};\n"
                    "inline constexpr int ${name}_cubin_architecture = ${CUDAKIT_KERNEL_ARCH};\n"
                    "inline constexpr int ${name}_ptx_image_architecture = ${CUDAKIT_KERNEL_OLDEST_ARCH};\n")
  string(APPEND hdr "}  // namespace cudakit_kernels\n")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/include/${name}_kernels.hpp "${hdr}")

  add_library(${target} OBJECT ${out}_embed.S)
  target_include_directories(${target} INTERFACE ${CMAKE_CURRENT_BINARY_DIR}/include)
endfunction()
