# cmake -D BUILD_DIR=... -D EXAMPLES_DIR=... -D WORK_DIR=... -D CXX_COMPILER=...
#       [-D GENERATOR=... -D MAKE_PROGRAM=... -D CXX_LAUNCHER=... -D BUILD_TYPE=...
#        -D CUDA_ROOT=...] -P install_test.cmake
#
# Installs BUILD_DIR into WORK_DIR/prefix, configures EXAMPLES_DIR on its own
# (find_package(infer) with only that prefix to find it in), builds it with
# the build's compiler and runs embedded_engine on the CPU. Fails if a file
# the package needs is not installed (a header the engine's headers include,
# a library, a dependency inferConfig.cmake does not find), or if the
# package's CMake files name the build or source folder.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/steps.cmake)
infer_require(install_test.cmake BUILD_DIR EXAMPLES_DIR WORK_DIR CXX_COMPILER)

set(prefix ${WORK_DIR}/prefix)
set(example_build ${WORK_DIR}/examples-build)
file(REMOVE_RECURSE ${WORK_DIR})

step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# Relocatable: the package's CMake files locate everything from their own
# place; a path into the build or its sources would work here and nowhere else.
get_filename_component(source_dir ${EXAMPLES_DIR} DIRECTORY)
file(GLOB_RECURSE cmake_files ${prefix}/*.cmake)
if(NOT cmake_files)
  message(FATAL_ERROR "no CMake files installed under ${prefix}")
endif()
foreach(f IN LISTS cmake_files)
  file(READ ${f} text)
  foreach(dir ${BUILD_DIR} ${source_dir})
    string(FIND "${text}" "${dir}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names ${dir}: the package would not work elsewhere")
    endif()
  endforeach()
endforeach()

set(args -S ${EXAMPLES_DIR} -B ${example_build}
         -D CMAKE_PREFIX_PATH=${prefix}
         -D CMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
         -D CMAKE_CXX_COMPILER=${CXX_COMPILER})
if(GENERATOR)
  list(APPEND args -G ${GENERATOR})
endif()
if(MAKE_PROGRAM)
  list(APPEND args -D CMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CXX_LAUNCHER)
  list(APPEND args -D CMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
endif()
if(BUILD_TYPE)
  list(APPEND args -D CMAKE_BUILD_TYPE=${BUILD_TYPE})
endif()
if(CUDA_ROOT)
  # The toolkit the libraries were built with, for find_dependency(CUDAToolkit).
  list(APPEND args -D CUDAToolkit_ROOT=${CUDA_ROOT})
endif()
step("configuring examples/ against ${prefix}" ${CMAKE_COMMAND} ${args})

# Found in the staging prefix, not in an installed copy elsewhere.
file(STRINGS ${example_build}/CMakeCache.txt infer_dir REGEX "^infer_DIR:")
if(NOT infer_dir MATCHES "=${prefix}/")
  message(FATAL_ERROR "find_package(infer) did not use ${prefix}: ${infer_dir}")
endif()

step("building examples/" ${CMAKE_COMMAND} --build ${example_build})

step("running embedded_engine" ${example_build}/embedded_engine cpu)
message(STATUS "embedded_engine:\n${step_output}")
if(NOT step_output MATCHES "device: cpu\n" OR
   NOT step_output MATCHES "requests answered: 64 in [0-9]+ batched executions")
  message(FATAL_ERROR "embedded_engine printed something else:\n${step_output}")
endif()
