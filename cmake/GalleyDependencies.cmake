# Finds galley's Debian-packaged dependencies and exposes each as an imported
# target, so folder CMakeLists only name targets. The client needs only
# nlohmann-json; everything else is the daemon's.
find_package(Threads REQUIRED)

# A missing dependency is not an error at once: they are gathered, so that a
# source build (`pip install` of the sdist) names everything it lacks in one
# message, with the Debian/Ubuntu package that brings each.
set(GALLEY_MISSING_DEPENDENCIES "")
function(galley_require found what debian_package)
  if(NOT found)
    set(GALLEY_MISSING_DEPENDENCIES ${GALLEY_MISSING_DEPENDENCIES}
        "${what} (Debian/Ubuntu: ${debian_package})" PARENT_SCOPE)
  endif()
endfunction()

find_package(nlohmann_json 3.10 QUIET)
galley_require("${nlohmann_json_FOUND}" "nlohmann-json >= 3.10" nlohmann-json3-dev)

if(GALLEY_BUILD_SERVER)
  # Header-only Boost, for the server side alone: Interprocess's allocator
  # (the cache's arena), Beast (the metrics server) and Math (the sampler's
  # uniformity statistics).
  find_package(Boost 1.74 QUIET CONFIG)
  galley_require("${Boost_FOUND}" "Boost >= 1.74 headers" libboost-dev)
  find_package(PkgConfig QUIET)
  galley_require("${PKG_CONFIG_FOUND}" "pkg-config" pkg-config)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(TurboJPEG IMPORTED_TARGET libturbojpeg)
    galley_require("${TurboJPEG_FOUND}" "libturbojpeg" libturbojpeg0-dev)
    pkg_check_modules(LibJpeg IMPORTED_TARGET libjpeg)
    galley_require("${LibJpeg_FOUND}" "libjpeg (libjpeg-turbo)" libjpeg-dev)
    pkg_check_modules(LibExif IMPORTED_TARGET libexif)
    galley_require("${LibExif_FOUND}" "libexif" libexif-dev)
    pkg_check_modules(LibWebP IMPORTED_TARGET libwebp)
    galley_require("${LibWebP_FOUND}" "libwebp" libwebp-dev)
    pkg_check_modules(LibPng IMPORTED_TARGET libpng16)
    galley_require("${LibPng_FOUND}" "libpng 1.6" libpng-dev)
    # Packed pixels (server/image/pixel_codec.h): a max_resolution dataset's
    # shrunk images in the encoded tiers.
    pkg_check_modules(Zstd IMPORTED_TARGET libzstd)
    galley_require("${Zstd_FOUND}" "libzstd (Zstandard)" libzstd-dev)
  endif()
  # Dataset fingerprints: XXH3, compiled in from
  # its header (XXH_INLINE_ALL), so nothing is linked.
  find_path(XXHASH_INCLUDE_DIR xxhash.h)
  galley_require("${XXHASH_INCLUDE_DIR}" "xxHash headers" libxxhash-dev)
  add_library(galley_xxhash INTERFACE)
  target_include_directories(galley_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIR})
  target_compile_definitions(galley_xxhash INTERFACE XXH_INLINE_ALL)
  # The ACL checks of what a user may read (server/dataset links -lacl).
  find_path(GALLEY_ACL_INCLUDE_DIR sys/acl.h)
  find_library(GALLEY_ACL_LIBRARY acl)
  galley_require("${GALLEY_ACL_INCLUDE_DIR}" "libacl headers" libacl1-dev)
  galley_require("${GALLEY_ACL_LIBRARY}" "libacl" libacl1-dev)
  # The remote tier's memcached client: consistent hashing, failover, SASL;
  # and libcrypto (OpenSSL 3's EVP_MAC) for the HMAC that signs its values.
  if(GALLEY_REMOTE_TIER)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(LibMemcached IMPORTED_TARGET libmemcached)
      galley_require("${LibMemcached_FOUND}" "libmemcached" libmemcached-dev)
    endif()
    find_package(OpenSSL 3.0 QUIET COMPONENTS Crypto)
    galley_require("${OpenSSL_FOUND}" "OpenSSL >= 3.0 libcrypto" libssl-dev)
  endif()
  # The S3 client (server/objectstore): libcurl for HTTP(S), SigV4 signing
  # and the connection pool; pugixml for ListObjectsV2's XML.
  if(GALLEY_OBJECT_STORE)
    find_package(CURL 7.85 QUIET)
    galley_require("${CURL_FOUND}" "libcurl >= 7.85" libcurl4-openssl-dev)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(PugiXml IMPORTED_TARGET pugixml)
      galley_require("${PugiXml_FOUND}" "pugixml" libpugixml-dev)
    endif()
  endif()
  find_package(TBB QUIET)
  galley_require("${TBB_FOUND}" "oneTBB" libtbb-dev)
  find_package(spdlog QUIET)
  galley_require("${spdlog_FOUND}" "spdlog" libspdlog-dev)
  find_package(tomlplusplus QUIET)
  galley_require("${tomlplusplus_FOUND}" "toml++" libtomlplusplus-dev)
  find_package(CLI11 QUIET)
  galley_require("${CLI11_FOUND}" "CLI11" libcli11-dev)
endif()

if(GALLEY_MISSING_DEPENDENCIES)
  list(JOIN GALLEY_MISSING_DEPENDENCIES "\n  - " missing)
  message(FATAL_ERROR "galley cannot be built here; missing:\n  - ${missing}\n"
    "Install these (scripts/setup.sh lists every package galley's build and tests use). "
    "A Python user without them can install a binary wheel instead (pip install galley-data, "
    "docs/install.md), or build the client alone, without galleyd: "
    "pip install . -Ccmake.define.GALLEY_WHEEL_DAEMON=OFF (needs nlohmann-json only).")
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
