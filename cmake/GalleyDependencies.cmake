# Finds galley's Debian-packaged dependencies and exposes each as an imported
# target, so folder CMakeLists only name targets. The client needs only
# nlohmann-json; everything else is the daemon's.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)

if(GALLEY_BUILD_SERVER)
  # Header-only Boost, for the server side alone: Interprocess's allocator
  # (the cache's arena), Beast (the metrics server) and Math (the sampler's
  # uniformity statistics).
  find_package(Boost 1.74 REQUIRED CONFIG)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(TurboJPEG REQUIRED IMPORTED_TARGET libturbojpeg)
  pkg_check_modules(LibJpeg REQUIRED IMPORTED_TARGET libjpeg)
  pkg_check_modules(LibExif REQUIRED IMPORTED_TARGET libexif)
  pkg_check_modules(LibWebP REQUIRED IMPORTED_TARGET libwebp)
  pkg_check_modules(LibPng REQUIRED IMPORTED_TARGET libpng16)
  # Dataset fingerprints: XXH3, compiled in from
  # its header (XXH_INLINE_ALL), so nothing is linked.
  find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
  add_library(galley_xxhash INTERFACE)
  target_include_directories(galley_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIR})
  target_compile_definitions(galley_xxhash INTERFACE XXH_INLINE_ALL)
  # The remote tier's memcached client: consistent hashing, failover, SASL;
  # and libcrypto (OpenSSL 3's EVP_MAC) for the HMAC that signs its values.
  if(GALLEY_REMOTE_TIER)
    pkg_check_modules(LibMemcached REQUIRED IMPORTED_TARGET libmemcached)
    find_package(OpenSSL 3.0 REQUIRED COMPONENTS Crypto)
  endif()
  find_package(TBB REQUIRED)
  find_package(spdlog REQUIRED)
  find_package(tomlplusplus REQUIRED)
  find_package(CLI11 REQUIRED)
endif()

# OpenCV is no part of galleyd (Debian's build pulls in X11, GL and BLAS):
# tests and benchmarks use it as an independent reference and to write test
# images. Debian splits it into per-module -dev packages and only the
# umbrella libopencv-dev ships the CMake config, so the modules are found
# directly.
if(GALLEY_BUILD_SERVER AND (GALLEY_BUILD_TESTS OR GALLEY_BUILD_BENCH))
  find_path(OpenCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4 REQUIRED)
  add_library(galley_opencv INTERFACE)
  foreach(module core imgproc imgcodecs)
    find_library(OpenCV_${module}_LIBRARY opencv_${module} REQUIRED)
    target_link_libraries(galley_opencv INTERFACE ${OpenCV_${module}_LIBRARY})
  endforeach()
  target_include_directories(galley_opencv SYSTEM INTERFACE ${OpenCV_INCLUDE_DIR})
endif()

if(GALLEY_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(GALLEY_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
if(GALLEY_BUILD_PYTHON)
  # The module is built for the Python named by -DPython_EXECUTABLE (pip's
  # build passes its own; scripts/build.sh passes Debian's /usr/bin/python3).
  # It uses no NumPy, so any pybind11 from 2.10 on serves, for NumPy 1 and 2.
  find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
  find_package(pybind11 2.10 REQUIRED CONFIG)
endif()
