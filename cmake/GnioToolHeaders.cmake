# The tools' header-only dependencies (GNIO_BUILD_TOOLS only; the library takes none): CLI11 for
# the command lines of gnio-run, gnio-info and the benchmark driver, nlohmann-json for the JSON
# that gnio-info and gnio-perf write. Debian's libcli11-dev and nlohmann-json3-dev
# (scripts/setup-deps.sh installs them), or the same packages unpacked with dpkg -x into
# .deps/tool-headers (tests/gpu/session-run.sh does that on machines without a package registry,
# from the .deb files scripts/fetch-tool-debs.sh downloads). Defines gnio_tool_headers, an
# interface target the tools link. Oldest versions: CLI11 2.1, nlohmann-json 3.9 (ordered_json).
set(GNIO_TOOL_HEADERS_ROOT "${PROJECT_SOURCE_DIR}/.deps/tool-headers/usr" CACHE PATH
    "A tree holding include/CLI/CLI.hpp and include/nlohmann/json.hpp, searched before the system")

add_library(gnio_tool_headers INTERFACE)
set(missing "")

# Adds one package to gnio_tool_headers: its CMake config (imported TARGET), else the folder
# holding HEADER; appends WHAT to `missing` when neither is found.
function(gnio_tool_header package version target header what)
  find_package(${package} ${version} CONFIG QUIET HINTS ${GNIO_TOOL_HEADERS_ROOT})
  if(TARGET ${target})
    target_link_libraries(gnio_tool_headers INTERFACE ${target})
    message(STATUS "gnio: tools use ${package} ${${package}_VERSION} (${${package}_DIR})")
    return()
  endif()
  find_path(GNIO_${package}_INCLUDE ${header} HINTS ${GNIO_TOOL_HEADERS_ROOT}/include)
  if(GNIO_${package}_INCLUDE)
    target_include_directories(gnio_tool_headers SYSTEM INTERFACE ${GNIO_${package}_INCLUDE})
    message(STATUS "gnio: tools use ${package} from ${GNIO_${package}_INCLUDE}")
  else()
    set(missing ${missing} "${what}" PARENT_SCOPE)
  endif()
endfunction()

gnio_tool_header(CLI11 2.1 CLI11::CLI11 CLI/CLI.hpp "CLI11 (libcli11-dev)")
gnio_tool_header(nlohmann_json 3.9 nlohmann_json::nlohmann_json nlohmann/json.hpp
                 "nlohmann-json (nlohmann-json3-dev)")

if(missing)
  list(JOIN missing " and " missing)
  message(FATAL_ERROR
          "gnio's tools (gnio-run, gnio-info, gnio-perf) need the header-only ${missing}: "
          "scripts/setup-deps.sh installs them (Debian: apt-get install libcli11-dev "
          "nlohmann-json3-dev); without a package registry, unpack the .deb files that "
          "scripts/fetch-tool-debs.sh downloads with dpkg -x into .deps/tool-headers (searched: "
          "GNIO_TOOL_HEADERS_ROOT=${GNIO_TOOL_HEADERS_ROOT}); or configure with "
          "-DGNIO_BUILD_TOOLS=OFF to build the library without the tools")
endif()
