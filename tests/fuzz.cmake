# Fuzz targets (tests/fuzz). With GALLEY_FUZZ=ON (clang; scripts/fuzz.sh)
# they are libFuzzer binaries; otherwise they link a small driver and ctest
# replays the committed seed corpus through them, so every reproducer stays
# a regression test in the ordinary build.
option(GALLEY_FUZZ "Build the fuzz targets as libFuzzer binaries (clang)" OFF)

function(galley_add_fuzzer name)
  cmake_parse_arguments(ARG "" "CORPUS" "SOURCES;LIBS" ${ARGN})
  if(GALLEY_FUZZ)
    add_executable(${name} ${ARG_SOURCES})
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
  else()
    add_executable(${name} ${ARG_SOURCES} fuzz/corpus_driver.cc)
    add_test(NAME ${name}_corpus
             COMMAND ${name} ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${ARG_CORPUS})
    set_tests_properties(${name}_corpus PROPERTIES LABELS unit)
  endif()
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
endfunction()

galley_add_fuzzer(frame_fuzzer SOURCES fuzz/frame_fuzzer.cc LIBS galley_wire CORPUS frame)
galley_add_fuzzer(segment_fuzzer SOURCES fuzz/segment_fuzzer.cc LIBS galley_wire CORPUS segment)
if(GALLEY_BUILD_SERVER)
  galley_add_fuzzer(image_decoder_fuzzer SOURCES fuzz/image_decoder_fuzzer.cc LIBS galley_image
                    CORPUS image)
endif()
