# FindDNNL: oneDNN (Debian's libdnnl-dev) as the imported target DNNL::dnnl,
# the name oneDNN's own CMake config gives it.
#
# Why a find module: Debian 12's dnnl-config.cmake does
# find_package(OpenCL REQUIRED) (its libdnnl is built with the OpenCL GPU
# runtime) and so fails unless the OpenCL headers and libOpenCL.so dev link
# are installed, which nothing here needs. This module looks for the header
# and the library only. It is installed beside inferConfig.cmake so that
# find_package(infer) finds oneDNN the same way on the consumer's machine
# (the exported targets name DNNL::dnnl, never a path of the build machine).
#
# Hints: DNNL_ROOT or CMAKE_PREFIX_PATH. Result: DNNL_FOUND, DNNL::dnnl,
# and the cache entries DNNL_INCLUDE_DIR and DNNL_LIBRARY.
if(TARGET DNNL::dnnl)
  # Already there (oneDNN's own config, or an earlier find).
  set(DNNL_FOUND TRUE)
  return()
endif()

find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(DNNL_LIBRARY dnnl)
mark_as_advanced(DNNL_INCLUDE_DIR DNNL_LIBRARY)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DNNL REQUIRED_VARS DNNL_LIBRARY DNNL_INCLUDE_DIR)

if(DNNL_FOUND)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES
                        IMPORTED_LOCATION "${DNNL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
endif()
