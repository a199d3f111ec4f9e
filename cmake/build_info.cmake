# What `--version` prints: kiln's version, the git commit, the build type and
# the compiler. The commit is read at build time (not only at configure time),
# so that a rebuild after a commit never reports the previous one; the header is
# rewritten only when its text changes, so an unchanged tree recompiles nothing.
set(KILN_BUILD_INFO_HEADER ${PROJECT_BINARY_DIR}/generated/kiln_build_info.h)
add_custom_target(kiln-build-info-header
  COMMAND ${CMAKE_COMMAND}
    -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
    -DOUTPUT=${KILN_BUILD_INFO_HEADER}
    -DVERSION=${PROJECT_VERSION}
    "-DBUILD_TYPE=${CMAKE_BUILD_TYPE}"
    "-DCOMPILER=${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}"
    -P ${PROJECT_SOURCE_DIR}/cmake/write_build_info.cmake
  BYPRODUCTS ${KILN_BUILD_INFO_HEADER}
  COMMENT "Checking the git commit for --version"
  VERBATIM)

# Every tool's --version (tools/common/version.h).
add_library(kiln-version STATIC ${PROJECT_SOURCE_DIR}/tools/common/version.cpp)
add_dependencies(kiln-version kiln-build-info-header)
target_include_directories(kiln-version PRIVATE ${PROJECT_BINARY_DIR}/generated)
target_link_libraries(kiln-version PUBLIC kiln-lib)
