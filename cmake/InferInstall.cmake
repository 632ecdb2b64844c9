# What `cmake --install` puts under the prefix, in two components:
#   dev     the in-process engine as a CMake package: static libraries,
#           headers in the source layout under include/infer (the targets
#           put it on the include path: #include "engine/engine.h"), and
#           lib/cmake/infer/ (inferConfig.cmake, the version file, the
#           exported targets infer::engine, infer::models, infer::batching,
#           infer::runtime, and FindDNNL.cmake, which they need).
#   server  the infer-server binary, its systemd unit, the script that
#           writes the unit's configuration, and the README.
# The libraries are the ones declared with infer_package_library()
# (CMakeLists.txt). The front ends of server/ (gRPC, HTTP) and the model
# repository loader are not in the package: they would bring protobuf, gRPC
# and the generated headers into every consumer's find_package.
include(CMakePackageConfigHelpers)

set(INFER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/infer)

# --- Libraries and the exported targets --------------------------------------
get_property(infer_package_libraries GLOBAL PROPERTY INFER_PACKAGE_LIBRARIES)
install(TARGETS ${infer_package_libraries} EXPORT inferTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT inferTargets NAMESPACE infer:: DESTINATION ${INFER_INSTALL_CMAKEDIR}
        COMPONENT dev)

configure_package_config_file(cmake/inferConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/cmake/inferConfig.cmake
                              INSTALL_DESTINATION ${INFER_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/inferConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/inferConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/inferConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/FindDNNL.cmake
        DESTINATION ${INFER_INSTALL_CMAKEDIR} COMPONENT dev)

# --- Headers ------------------------------------------------------------------
# Every header of engine/, runtime/, batching/ and models/ (a service may
# implement its own infer::Model, or use the built-in ones), except the
# engine's private ones. Headers that include the CUDA toolkit's are left out
# of a build without CUDA, where the libraries hold no CUDA code either. The
# CUDA kernels' .cuh headers are internal to the libraries.
set(infer_header_excludes PATTERN "testdata" EXCLUDE PATTERN "tools" EXCLUDE)
if(NOT INFER_WITH_CUDA)
  foreach(h cuda_device.h bert_cuda.h bert_cuda_graphs.h)
    list(APPEND infer_header_excludes PATTERN ${h} EXCLUDE)
  endforeach()
endif()
install(DIRECTORY runtime batching models engine DESTINATION ${INFER_INSTALL_INCLUDEDIR}
        COMPONENT dev FILES_MATCHING PATTERN "*.h" ${infer_header_excludes}
        PATTERN "served_model.h" EXCLUDE
        PATTERN "*test_util.h" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/generated/runtime/build_config.h
        DESTINATION ${INFER_INSTALL_INCLUDEDIR}/runtime COMPONENT dev)

# --- The server ---------------------------------------------------------------
install(TARGETS infer-server RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT server)
# The unit runs /usr/bin/infer-server: it matches the package (prefix /usr),
# not an install under another prefix. Relative to the prefix, so that an
# install into a staging folder stays inside it; /usr/lib/systemd/system is
# where packages put units.
install(FILES deploy/systemd/infer-server@.service DESTINATION lib/systemd/system
        COMPONENT server)
# Writes the /etc/infer-server files the unit reads (instance-N.env,
# server.toml) and the load balancers' configurations.
install(PROGRAMS deploy/gen-node-config.py
        DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/infer-server COMPONENT server)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/infer-server
        COMPONENT server)
