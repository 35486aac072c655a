# Precompiled headers for the test command's sanitizer build (DUGONG_PCH, set by
# scripts/test.sh; decision 0086). The standard library's heavy headers and nlohmann's
# json (and gtest's, for the targets that link it) are parsed once per build into a
# precompiled header, which every other target reuses (REUSE_FROM) instead of parsing them
# again in each of its unity batches. clang checks that a reused header was made with the
# target's flags; the flags that differ among the targets are the simulators' -O2
# (dugong_optimise_for_the_simulators) and the simulated world's lack of sanitizers
# (dugong_simulated_world), so there is one header per (optimised, unsanitized, gtest)
# triple. Every file still includes what it uses: the builds without DUGONG_PCH (g++ among
# them) check that.
set(DUGONG_PCH_HEADERS
    <algorithm> <chrono> <cstdint> <filesystem> <fstream> <functional> <map> <memory> <optional>
    <set> <sstream> <string> <thread> <utility> <vector> <nlohmann/json.hpp>)

# The target that makes the precompiled header `name` (created on first use).
function(dugong_pch_target name optimised unsanitized with_gtest)
  if(TARGET ${name})
    return()
  endif()
  # Its one source is empty: the header is what it makes; the object is linked nowhere.
  set(source ${PROJECT_BINARY_DIR}/generated/dugong_pch.cc)
  if(NOT EXISTS ${source})
    file(WRITE ${source} "// Compiled with the precompiled header only (cmake/precompiled_headers.cmake).\n")
  endif()
  add_library(${name} OBJECT ${source})
  target_link_libraries(${name} PRIVATE nlohmann_json::nlohmann_json)
  set(headers ${DUGONG_PCH_HEADERS})
  if(with_gtest)
    target_link_libraries(${name} PRIVATE GTest::gtest)
    list(APPEND headers <gtest/gtest.h>)
  endif()
  if(optimised)
    target_compile_options(${name} PRIVATE -O2)
  endif()
  if(unsanitized)
    target_compile_options(${name} PRIVATE -fno-sanitize=all)
  endif()
  target_precompile_headers(${name} PRIVATE ${headers})
endfunction()

# Every C++ target of the project reuses the precompiled header that matches its flags.
function(dugong_precompile_headers)
  dugong_targets_under(${PROJECT_SOURCE_DIR} targets)  # cmake/layers.cmake
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY)$" OR target MATCHES "^dugong_pch")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    if(NOT sources MATCHES "\\.cc(;|$)")
      continue()
    endif()
    get_target_property(options ${target} COMPILE_OPTIONS)
    get_target_property(libs ${target} LINK_LIBRARIES)
    set(optimised OFF)
    set(name dugong_pch)
    if("-O2" IN_LIST options)
      set(optimised ON)
      string(APPEND name _o2)
    endif()
    set(unsanitized OFF)
    if("-fno-sanitize=all" IN_LIST options)
      set(unsanitized ON)
      string(APPEND name _unsanitized)
    endif()
    set(with_gtest OFF)
    if(libs MATCHES "GTest::")
      set(with_gtest ON)
      string(APPEND name _gtest)
    endif()
    dugong_pch_target(${name} ${optimised} ${unsanitized} ${with_gtest})
    target_precompile_headers(${target} REUSE_FROM ${name})
  endforeach()
endfunction()
