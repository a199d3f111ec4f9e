# Cross-compiles kiln for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu,
# against the arm64 libraries that Debian multiarch installs beside the host's
# (libfmt-dev:arm64, libpcre2-dev:arm64, libcpp-httplib-dev:arm64); the
# header-only ones (xsimd, xtl, Catch2, nlohmann-json) are the host's.
# scripts/test-aarch64.sh installs all of it and runs the suite under qemu.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(KILN_AARCH64_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${KILN_AARCH64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${KILN_AARCH64_TRIPLE}-g++)

# Programs (python3, git) come from the host; libraries and their CMake/pkg-config
# files from the target's multiarch folders, with the shared /usr/include.
set(CMAKE_FIND_ROOT_PATH /usr/${KILN_AARCH64_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_LIBRARY_ARCHITECTURE ${KILN_AARCH64_TRIPLE})
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${KILN_AARCH64_TRIPLE}/pkgconfig:/usr/share/pkgconfig)

# The build machine's CPU says nothing about the target's: no -march=native.
set(KILN_NATIVE OFF CACHE BOOL "Generate code for the build machine's CPU (-march=native)")
# The host's Open MPI is x86-64 (its mpicxx would be found, its libraries not
# linked): the cross build runs its tools alone. (An aarch64 MPI build would
# need libopenmpi-dev:arm64 and the ranks under qemu.)
set(KILN_MPI OFF CACHE BOOL "Build the tools that run under mpirun with MPI (needs Open MPI)")

# ctest (and the tests that start kiln's programs, tests/support/run_tool.cpp)
# run the aarch64 binaries under user-mode qemu, so binfmt_misc need not be set
# up. The target's C library is the multiarch libc6:arm64 that the libraries
# above depend on: `-L /` makes qemu take the dynamic loader from the same
# package (/lib/ld-linux-aarch64.so.1). With `-L /usr/aarch64-linux-gnu` the
# cross package's loader would meet the multiarch libc.so.6 (the loader cache
# lists it), two builds of glibc that disagree on their shared structures:
# the first pthread_create then spins forever. QEMU_CPU in the environment
# chooses the emulated CPU (qemu's default offers every feature, sdot
# included; QEMU_CPU=cortex-a53 is a plain ARMv8.0 core).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
