# The ucx network backend (GNIO_NET=ucx): GNIO_UCX=AUTO builds it when UCX is found, ON requires
# it, OFF leaves it out. UCX is looked up under UCX_ROOT first (a UCX of your own, for example the
# one in PyPI's libucx-cu12 wheel, which has CUDA support), then through pkg-config (Debian's
# libucx-dev). Sets GNIO_HAVE_UCX and the imported target gnio::ucx.
set(GNIO_UCX "AUTO" CACHE STRING "Build the ucx network backend: AUTO (when UCX is found), ON, OFF")
set_property(CACHE GNIO_UCX PROPERTY STRINGS AUTO ON OFF)
set(UCX_ROOT "$ENV{UCX_ROOT}" CACHE PATH "A UCX installation (include/ucp/api/ucp.h, lib/libucp.so or lib/x86_64-linux-gnu/libucp.so) to use instead of the system's")

set(GNIO_HAVE_UCX OFF)
if(NOT GNIO_UCX STREQUAL "OFF")
  if(UCX_ROOT)
    find_path(GNIO_UCX_INCLUDE ucp/api/ucp.h PATHS ${UCX_ROOT}/include NO_DEFAULT_PATH)
    # lib/x86_64-linux-gnu: Debian's packages unpacked with dpkg -x (UCX_ROOT = that tree's usr).
    find_library(GNIO_UCX_UCP ucp PATHS ${UCX_ROOT}/lib ${UCX_ROOT}/lib/x86_64-linux-gnu NO_DEFAULT_PATH)
    find_library(GNIO_UCX_UCS ucs PATHS ${UCX_ROOT}/lib ${UCX_ROOT}/lib/x86_64-linux-gnu NO_DEFAULT_PATH)
    if(GNIO_UCX_INCLUDE AND GNIO_UCX_UCP AND GNIO_UCX_UCS)
      add_library(gnio::ucx INTERFACE IMPORTED)
      target_include_directories(gnio::ucx INTERFACE ${GNIO_UCX_INCLUDE})
      target_link_libraries(gnio::ucx INTERFACE ${GNIO_UCX_UCP} ${GNIO_UCX_UCS})
      set(GNIO_HAVE_UCX ON)
      set(GNIO_UCX_FROM "${UCX_ROOT}")
    endif()
  else()
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(GNIO_UCX_PC QUIET IMPORTED_TARGET ucx)
      if(GNIO_UCX_PC_FOUND)
        add_library(gnio::ucx INTERFACE IMPORTED)
        target_link_libraries(gnio::ucx INTERFACE PkgConfig::GNIO_UCX_PC)
        set(GNIO_HAVE_UCX ON)
        set(GNIO_UCX_FROM "pkg-config ucx ${GNIO_UCX_PC_VERSION}")
      endif()
    endif()
  endif()
  if(GNIO_UCX STREQUAL "ON" AND NOT GNIO_HAVE_UCX)
    message(FATAL_ERROR "GNIO_UCX=ON but UCX was not found: install libucx-dev (pkg-config ucx) "
                        "or set UCX_ROOT to a UCX installation")
  endif()
endif()
if(GNIO_HAVE_UCX)
  # GNIO_UCX_VERSION (major.minor of UCX's API): UCX 1.16 and later find no protocol for a
  # fetching atomic without RDMA hardware, so tests that force UCX atomics run only before it.
  find_path(GNIO_UCX_VERSION_DIR ucp/api/ucp_version.h
            HINTS ${GNIO_UCX_INCLUDE} ${GNIO_UCX_PC_INCLUDE_DIRS} NO_CACHE)
  set(GNIO_UCX_VERSION "")
  if(GNIO_UCX_VERSION_DIR)
    file(STRINGS "${GNIO_UCX_VERSION_DIR}/ucp/api/ucp_version.h" ucx_api
         REGEX "^#define UCP_API_(MAJOR|MINOR) +[0-9]+")
    string(REGEX MATCH "MAJOR +([0-9]+)" _ "${ucx_api}")
    set(ucx_major "${CMAKE_MATCH_1}")
    string(REGEX MATCH "MINOR +([0-9]+)" _ "${ucx_api}")
    set(GNIO_UCX_VERSION "${ucx_major}.${CMAKE_MATCH_1}")
  endif()
  message(STATUS "gnio: ucx backend from ${GNIO_UCX_FROM} (UCX API ${GNIO_UCX_VERSION})")
else()
  message(STATUS "gnio: ucx backend not built (GNIO_UCX=${GNIO_UCX}; libucx-dev or UCX_ROOT)")
endif()
