# cpack -G DEB (from the build folder) writes two Debian packages:
#   infer-server   the server, its systemd unit and gen-node-config.py
#                  (component "server", cmake/InferInstall.cmake)
#   libinfer-dev   the engine's static libraries, headers and CMake package
#                  (component "dev")
# Both under /usr; the unit expects /usr/bin/infer-server.
set(CPACK_PACKAGE_NAME infer)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Bounded-batching inference server (KServe v2 gRPC)")
if(NOT CPACK_PACKAGE_CONTACT)
  set(CPACK_PACKAGE_CONTACT "infer developers <dev@infer.local>")
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL server dev)
# Debian's own names: infer-server_0.1.0_amd64.deb.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
# Debug information stays in the build; the packaged binary is stripped.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME infer-server)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
# dpkg-shlibdeps names the packages of the shared libraries the binary links.
set(CPACK_DEBIAN_SERVER_PACKAGE_SHLIBDEPS ON)
# gen-node-config.py is Python (standard library only).
set(CPACK_DEBIAN_SERVER_PACKAGE_RECOMMENDS python3)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libinfer-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# Static libraries: no shared objects for dpkg-shlibdeps to read. The
# packages whose headers and CMake configs inferConfig.cmake finds:
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libabsl-dev, libdnnl-dev, nlohmann-json3-dev, libgomp1, libicu-dev, libpcre2-dev, pkg-config")

if(INFER_WITH_CUDA)
  # cudart and cuBLAS come from NVIDIA's repository (the Dockerfile's build
  # stage installs their -dev packages), or from no package at all:
  # dpkg-shlibdeps cannot name them (CPack runs it with --ignore-missing-info,
  # so they are left out silently). Name NVIDIA's packages by hand; empty
  # INFER_DEB_CUDA_DEPENDS for machines whose CUDA is installed otherwise.
  set(cuda_version "${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
  set(INFER_DEB_CUDA_DEPENDS "cuda-cudart-${cuda_version}, libcublas-${cuda_version}"
      CACHE STRING "Depends of the infer-server package for the CUDA libraries")
  set(INFER_DEB_CUDA_DEV_DEPENDS
      "cuda-cudart-dev-${cuda_version}, libcublas-dev-${cuda_version}"
      CACHE STRING "Depends of the libinfer-dev package for the CUDA libraries")
  set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "${INFER_DEB_CUDA_DEPENDS}")
  if(INFER_DEB_CUDA_DEV_DEPENDS)
    string(APPEND CPACK_DEBIAN_DEV_PACKAGE_DEPENDS ", ${INFER_DEB_CUDA_DEV_DEPENDS}")
  endif()
endif()

include(CPack)
cpack_add_component(server DISPLAY_NAME "infer-server"
                    DESCRIPTION "infer-server: KServe v2 / Triton gRPC inference server with bounded batching, and its systemd unit")
cpack_add_component(dev DISPLAY_NAME "libinfer-dev"
                    DESCRIPTION "The infer engine for embedding in C++ services: static libraries, headers, CMake package (find_package(infer))")
