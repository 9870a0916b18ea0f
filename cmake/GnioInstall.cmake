# Install rules: headers, the versioned shared library, the CMake package and gnio.pc.
include(CMakePackageConfigHelpers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gnio DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.cuh")
install(FILES ${PROJECT_BINARY_DIR}/include/gnio/version.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gnio)
install(TARGETS gnio EXPORT gnioTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT gnioTargets NAMESPACE gnio:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnio)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gnioConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gnioConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnio)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gnioConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gnioConfig.cmake ${PROJECT_BINARY_DIR}/gnioConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gnio)
set(GNIO_PC_REQUIRES_LIBS "-lpthread")
if(GNIO_HAVE_CUDA)
  set(GNIO_PC_CUDA_CFLAGS "-DGNIO_HAVE_CUDA=1 -I${CUDAToolkit_INCLUDE_DIRS}")
  set(GNIO_PC_CUDA_LIBS "-L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
# The .pc file finds its prefix relative to where it is installed, so the install relocates.
file(RELATIVE_PATH GNIO_PC_TO_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
configure_file(${PROJECT_SOURCE_DIR}/cmake/gnio.pc.in ${PROJECT_BINARY_DIR}/gnio.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gnio.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
