# Kernel targets (engine/kernels/kernel_table.h): the kernel sources compiled
# once per instruction set into one binary, one table per target, chosen at
# start-up (kernel_targets.cpp).
#
# Each target's objects are linked into one relocatable object (ld -r, with
# section groups dissolved so that its inline functions and templates are plain
# sections of it) and every symbol but its table function is made local
# (objcopy). So the copies of inline functions compiled with AVX-512 flags can
# only ever be called by that target's own code, never by the rest of the
# program, which is compiled for the baseline. A target must run no code at
# start-up (no dynamic initializers): that code would run on every CPU; the
# build checks this.

set(_kernels ${PROJECT_SOURCE_DIR}/engine/kernels)
# Compiled into every target.
set(KILN_KERNELS_GENERIC
  ${_kernels}/attention.cpp
  ${_kernels}/convert.cpp
  ${_kernels}/gradients.cpp
  ${_kernels}/vector.cpp
  ${_kernels}/kernel_table_entry.cpp)
# The matmul sets, each compiled into the targets whose instructions it needs.
file(GLOB KILN_KERNELS_AVX2 CONFIGURE_DEPENDS ${_kernels}/matmul_avx2*.cpp)
file(GLOB KILN_KERNELS_AVX512 CONFIGURE_DEPENDS ${_kernels}/matmul_avx512*.cpp)
file(GLOB KILN_KERNELS_NEON CONFIGURE_DEPENDS ${_kernels}/matmul_neon*.cpp)
# The AMX tile kernels are part of the AVX-512 set, with the tile instructions
# enabled for their files (they run only where amx_support() allows).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set_source_files_properties(${_kernels}/matmul_avx512_amx.cpp ${_kernels}/matmul_avx512_amx_kquants.cpp
    PROPERTIES COMPILE_OPTIONS "-mamx-tile;-mamx-int8")
endif()
# What the library must not compile for the baseline itself.
set(KILN_KERNEL_TARGET_SOURCES ${KILN_KERNELS_GENERIC} ${KILN_KERNELS_AVX2} ${KILN_KERNELS_AVX512} ${KILN_KERNELS_NEON})

set(KILN_KERNEL_TARGET_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/target_object.sh)

# kiln_kernel_target(LIB ID NAME FLAGS SETS...): compiles the generic sources and
# the sources of each matmul set in SETS (AVX2, AVX512, NEON) with FLAGS into
# one object of LIB whose only global symbol is kiln_kernels_<ID>.
function(kiln_kernel_target lib id name flags)
  set(sources ${KILN_KERNELS_GENERIC})
  set(defs KILN_KERNEL_TARGET_NAME="${name}" KILN_KERNEL_TARGET_ENTRY=kiln_kernels_${id})
  foreach(set IN LISTS ARGN)
    if(KILN_KERNELS_${set})  # a set with no sources (NEON before it is written) adds nothing
      list(APPEND sources ${KILN_KERNELS_${set}})
      list(APPEND defs KILN_KERNELS_WITH_${set}=1)
    endif()
  endforeach()
  set(objects kiln-kernels-${id})
  add_library(${objects} OBJECT ${sources})
  separate_arguments(flag_list UNIX_COMMAND "${flags}")
  target_compile_options(${objects} PRIVATE ${flag_list})
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    # Static locals of inline functions as ordinary weak symbols, which the
    # step below can make local, not GNU "unique" ones, which it cannot.
    target_compile_options(${objects} PRIVATE -fno-gnu-unique)
  endif()
  target_compile_definitions(${objects} PRIVATE ${defs})
  target_include_directories(${objects} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${objects} PRIVATE fmt::fmt xsimd)
  set_target_properties(${objects} PROPERTIES POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)

  set(out ${CMAKE_CURRENT_BINARY_DIR}/kernels-${id}.o)
  # Sanitizers and coverage add module constructors of their own.
  if(KILN_SANITIZE OR KILN_FUZZ)
    set(check_init no)
  else()
    set(check_init yes)
  endif()
  add_custom_command(OUTPUT ${out}
    COMMAND sh ${KILN_KERNEL_TARGET_SCRIPT} ${CMAKE_CXX_COMPILER} ${CMAKE_OBJCOPY} ${CMAKE_READELF} ${CMAKE_NM}
            kiln_kernels_${id} ${check_init} ${out} $<TARGET_OBJECTS:${objects}>
    DEPENDS ${objects} $<TARGET_OBJECTS:${objects}> ${KILN_KERNEL_TARGET_SCRIPT}
    COMMAND_EXPAND_LISTS VERBATIM
    COMMENT "Kernel target ${name}: one object, only kiln_kernels_${id} global")
  set_source_files_properties(${out} PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${lib} PRIVATE ${out})
  string(TOUPPER ${id} upper)
  target_compile_definitions(${lib} PRIVATE KILN_TARGET_${upper}=1)
  # A baseline without a matmul set of its own is offered as "scalar" alone.
  if(ARGN OR NOT id STREQUAL "baseline")
    set_property(GLOBAL APPEND PROPERTY KILN_KERNEL_TARGET_NAMES ${name})
  endif()
endfunction()

# kiln_kernel_targets(LIB): the targets of this build.
function(kiln_kernel_targets lib)
  if(KILN_NATIVE)
    # One target, for the build machine, with every set its flags allow.
    kiln_kernel_target(${lib} native native "" AVX2 AVX512 NEON)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
    kiln_kernel_target(${lib} avx512_vnni avx512-vnni "-march=x86-64-v4 -mavx512vnni -mtune=generic" AVX2 AVX512)
    # The avx512-vnni target's row kernels with the AMX matmul set (kernel_targets.h).
    set_property(GLOBAL APPEND PROPERTY KILN_KERNEL_TARGET_NAMES amx)
    kiln_kernel_target(${lib} avx2 avx2 "-march=x86-64-v3 -mtune=generic" AVX2)
    kiln_kernel_target(${lib} baseline x86-64 "")
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
    if(KILN_KERNELS_NEON)
      # The same NEON sources, best first: with SMMLA (FEAT_I8MM, the int8
      # GEMM of prompt batches) and sdot; with sdot alone.
      kiln_kernel_target(${lib} neon_i8mm neon-i8mm "-march=armv8.2-a+dotprod+i8mm" NEON)
      kiln_kernel_target(${lib} neon_dotprod neon-dotprod "-march=armv8.2-a+dotprod" NEON)
    endif()
    kiln_kernel_target(${lib} baseline neon "" NEON)
  else()
    kiln_kernel_target(${lib} baseline generic "")
  endif()
endfunction()
