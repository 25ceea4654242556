# moonmath_add_code_objects(): compile a package's HIP device sources into one code object (.hsaco)
# per source per arch, installed as package data at <DESTINATION>/<arch>/<stem>.hsaco.
#
#   moonmath_add_code_objects(
#     TARGET      <name>              # a custom target that builds them all (added to ALL)
#     ARCHS       gfx942 gfx950       # archs this package supports; GPU_ARCHS narrows the set
#     SOURCE_DIR  csrc/device         # <dir>/*.hip build for every arch, <dir>/<arch>/*.hip for that arch
#     [SOURCES    extra.hip ...]      # more sources for every arch; each becomes <stem>.hsaco
#     DESTINATION moonmath_pkg/kernels
#     [INCLUDES   dir ...]            # besides moonmath-common's include/ and the package's csrc/
#     [DEPENDS    file ...])          # headers that trigger rebuilds (all common headers are added)
#
# GPU_ARCHS (CMake variable or environment variable): semicolon list, or "native" for the GPUs
# rocminfo / rocm_agent_enumerator report. Default: every arch in ARCHS.
# The compiler is found by moonmath_hipcc.py (MOONMATH_CLANG, ROCm, clang-NN >= 20, ziglang).

set(MOONMATH_COMMON_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
get_filename_component(_mm_common_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
if(NOT DEFINED MOONMATH_COMMON_INCLUDE_DIR)
  set(MOONMATH_COMMON_INCLUDE_DIR "${_mm_common_root}/include")
endif()

function(_moonmath_native_archs out)
  set(found "")
  foreach(tool rocm_agent_enumerator rocminfo)
    find_program(_mm_tool ${tool} HINTS /opt/rocm/bin $ENV{ROCM_PATH}/bin)
    if(_mm_tool)
      execute_process(COMMAND ${_mm_tool} OUTPUT_VARIABLE txt ERROR_QUIET)
      string(REGEX MATCHALL "gfx[0-9a-f]+" found "${txt}")
      list(FILTER found EXCLUDE REGEX "gfx000")
      list(REMOVE_DUPLICATES found)
      break()
    endif()
    unset(_mm_tool CACHE)
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "GPU_ARCHS=native but no AMD GPU was found (rocm_agent_enumerator/rocminfo). "
                        "Name the archs instead, e.g. GPU_ARCHS=\"gfx942;gfx950\".")
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

function(moonmath_selected_archs supported out)
  set(req "${GPU_ARCHS}")
  if(NOT req AND DEFINED ENV{GPU_ARCHS})
    set(req "$ENV{GPU_ARCHS}")
  endif()
  if(NOT req)
    set(${out} "${supported}" PARENT_SCOPE)
    return()
  endif()
  if(req STREQUAL "native")
    _moonmath_native_archs(req)
  endif()
  string(REPLACE "," ";" req "${req}")
  set(sel "")
  foreach(a IN LISTS req)
    string(STRIP "${a}" a)
    if(a IN_LIST supported)
      list(APPEND sel ${a})
    endif()
  endforeach()
  set(${out} "${sel}" PARENT_SCOPE)
endfunction()

function(moonmath_add_code_objects)
  cmake_parse_arguments(MM "" "TARGET;DESTINATION;SOURCE_DIR" "ARCHS;SOURCES;INCLUDES;DEPENDS" ${ARGN})
  find_package(Python COMPONENTS Interpreter REQUIRED)
  moonmath_selected_archs("${MM_ARCHS}" archs)
  file(GLOB common_headers "${MOONMATH_COMMON_INCLUDE_DIR}/moonmath/*.hpp")
  set(outputs "")
  set(shared_sources ${MM_SOURCES})
  if(MM_SOURCE_DIR)
    file(GLOB dir_sources CONFIGURE_DEPENDS "${MM_SOURCE_DIR}/*.hip")
    file(GLOB_RECURSE dir_headers CONFIGURE_DEPENDS "${MM_SOURCE_DIR}/*.hpp")
    list(APPEND shared_sources ${dir_sources})
    list(APPEND MM_DEPENDS ${dir_headers})
  endif()
  foreach(arch IN LISTS archs)
    set(arch_sources ${shared_sources})
    if(MM_SOURCE_DIR)
      file(GLOB own CONFIGURE_DEPENDS "${MM_SOURCE_DIR}/${arch}/*.hip")
      list(APPEND arch_sources ${own})
    endif()
    foreach(src IN LISTS arch_sources)
      get_filename_component(stem "${src}" NAME_WE)
      get_filename_component(src_abs "${src}" ABSOLUTE)
      set(out "${CMAKE_CURRENT_BINARY_DIR}/kernels/${arch}/${stem}.hsaco")
      set(inc_flags -I "${MOONMATH_COMMON_INCLUDE_DIR}" -I "${CMAKE_CURRENT_SOURCE_DIR}/csrc/device")
      foreach(i IN LISTS MM_INCLUDES)
        list(APPEND inc_flags -I "${i}")
      endforeach()
      add_custom_command(
        OUTPUT "${out}"
        COMMAND "${Python_EXECUTABLE}" "${MOONMATH_COMMON_CMAKE_DIR}/moonmath_hipcc.py"
                --arch ${arch} ${inc_flags} -o "${out}" "${src_abs}"
        DEPENDS "${src_abs}" ${common_headers} ${MM_DEPENDS} "${MOONMATH_COMMON_CMAKE_DIR}/moonmath_hipcc.py"
        COMMENT "HIP ${stem} -> ${arch}"
        VERBATIM)
      list(APPEND outputs "${out}")
      install(FILES "${out}" DESTINATION "${MM_DESTINATION}/${arch}")
    endforeach()
  endforeach()
  # Record what built the code objects (shown by `python -m moonmath_amd info`).
  execute_process(COMMAND "${Python_EXECUTABLE}" "${MOONMATH_COMMON_CMAKE_DIR}/moonmath_hipcc.py" --print-compiler
                  OUTPUT_VARIABLE compiler OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REPLACE "\"" "'" compiler "${compiler}")
  string(REPLACE ";" "\", \"" archs_json "${archs}")
  if(archs)
    set(archs_json "\"${archs_json}\"")
  endif()
  # Every supported arch's code objects, built here or not: lets NoKernelError tell "not built for this
  # arch" (rebuild with GPU_ARCHS) from "not implemented for this arch".
  set(sources_json "")
  foreach(arch IN LISTS MM_ARCHS)
    set(stems "")
    set(all_sources ${shared_sources})
    if(MM_SOURCE_DIR)
      file(GLOB own "${MM_SOURCE_DIR}/${arch}/*.hip")
      list(APPEND all_sources ${own})
    endif()
    foreach(src IN LISTS all_sources)
      get_filename_component(stem "${src}" NAME_WE)
      list(APPEND stems "\"${stem}\"")
    endforeach()
    list(JOIN stems ", " stems)
    if(sources_json)
      string(APPEND sources_json ", ")
    endif()
    string(APPEND sources_json "\"${arch}\": [${stems}]")
  endforeach()
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/build_info.json"
       "{\"compiler\": \"${compiler}\", \"archs\": [${archs_json}], \"sources\": {${sources_json}}}\n")
  install(FILES "${CMAKE_CURRENT_BINARY_DIR}/build_info.json" DESTINATION "${MM_DESTINATION}")
  add_custom_target(${MM_TARGET} ALL DEPENDS ${outputs})
endfunction()

