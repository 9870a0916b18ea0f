# gnio_add_subdirectories(): adds every direct subdirectory of the current source directory that
# has a CMakeLists.txt, so a new tool, example, benchmark or test area needs no edit here.
# EXCEPT names subdirectories to leave out.
function(gnio_add_subdirectories)
  cmake_parse_arguments(A "" "" "EXCEPT" ${ARGN})
  file(GLOB dirs LIST_DIRECTORIES true CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*)
  foreach(dir IN LISTS dirs)
    get_filename_component(name ${dir} NAME)
    if(IS_DIRECTORY ${dir} AND EXISTS ${dir}/CMakeLists.txt AND NOT name IN_LIST A_EXCEPT)
      add_subdirectory(${dir})
    endif()
  endforeach()
endfunction()
