# cmake -D CPACK_COMMAND=... -D DPKG_DEB=... -D CPACK_CONFIG=.../CPackConfig.cmake
#       -D WORK_DIR=... [-D PYTHON=...] -P deb_test.cmake
#
# Builds the infer-server Debian package (cpack -G DEB, that component only)
# into WORK_DIR and checks it is self-consistent: the control fields, the
# binary and the systemd unit in it and no development files, the binary the
# unit's ExecStart names present in the package, and that binary, extracted,
# runs: --help succeeds and lists every option the unit passes. With PYTHON,
# the packaged gen-node-config.py writes the /etc/infer-server files the
# unit reads, defining the variables its ExecStart uses.
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/steps.cmake)
infer_require(deb_test.cmake CPACK_COMMAND DPKG_DEB CPACK_CONFIG WORK_DIR)

file(REMOVE_RECURSE ${WORK_DIR})
step("cpack" ${CPACK_COMMAND} -G DEB --config ${CPACK_CONFIG} -B ${WORK_DIR}
     -D CPACK_COMPONENTS_ALL=server)
file(GLOB debs ${WORK_DIR}/infer-server_*.deb)
list(LENGTH debs n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one infer-server_*.deb in ${WORK_DIR}, found ${n}: ${debs}")
endif()
message(STATUS "package: ${debs}")

# Control fields: the name, and dependencies (dpkg-shlibdeps' libc6 at least).
step("dpkg-deb -I" ${DPKG_DEB} -I ${debs})
message(STATUS "${step_output}")
if(NOT step_output MATCHES "\n Package: infer-server\n" OR
   NOT step_output MATCHES "\n Depends: [^\n]*libc6")
  message(FATAL_ERROR "unexpected control fields:\n${step_output}")
endif()

# Contents: the binary, the unit; nothing of the development package.
step("dpkg-deb -c" ${DPKG_DEB} -c ${debs})
foreach(f " ./usr/bin/infer-server\n" "lib/systemd/system/infer-server@.service\n"
          "/usr/share/infer-server/gen-node-config.py\n")
  string(FIND "${step_output}" "${f}" at)
  if(at EQUAL -1)
    string(STRIP "${f}" f)
    message(FATAL_ERROR "${f} is not in the package:\n${step_output}")
  endif()
endforeach()
if(step_output MATCHES "/include/|\\.a\n|/cmake/")
  message(FATAL_ERROR "development files in the server package:\n${step_output}")
endif()

set(root ${WORK_DIR}/root)
step("dpkg-deb -x" ${DPKG_DEB} -x ${debs} ${root})
file(GLOB unit ${root}/lib/systemd/system/infer-server@.service
               ${root}/usr/lib/systemd/system/infer-server@.service)
file(READ ${unit} text)
string(REPLACE "\\\n" " " text "${text}")
string(REGEX MATCH "\nExecStart=([^ \n]+)([^\n]*)" exec_start "${text}")
set(binary ${CMAKE_MATCH_1})
set(unit_args ${CMAKE_MATCH_2})
if(NOT EXISTS ${root}${binary})
  message(FATAL_ERROR "the unit runs ${binary}, which the package does not hold")
endif()

step("${binary} --help" ${root}${binary} --help)
string(REGEX MATCHALL "--[a-z][a-z0-9-]*" flags "${unit_args}")
if(NOT flags)
  message(FATAL_ERROR "no options read from the unit's ExecStart: ${exec_start}")
endif()
foreach(flag IN LISTS flags)
  string(FIND "${step_output}" "${flag}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the unit passes ${flag}, which ${binary} --help does not list")
  endif()
endforeach()
message(STATUS "${binary} --help lists the unit's options: ${flags}")

if(NOT PYTHON)
  message(STATUS "no PYTHON: gen-node-config.py against the unit not checked")
  return()
endif()
set(etc ${WORK_DIR}/etc-infer-server)
step("gen-node-config.py" ${PYTHON} ${root}/usr/share/infer-server/gen-node-config.py
     --instances 1 --out ${etc})
string(REGEX REPLACE "(^|\n)#[^\n]*" "\\1" directives "${text}")
string(REGEX MATCHALL "/etc/infer-server/[^ \n]+" etc_files "${directives}")
if(NOT etc_files)
  message(FATAL_ERROR "the unit reads nothing from /etc/infer-server: update this test")
endif()
foreach(f IN LISTS etc_files)
  string(REPLACE "/etc/infer-server/" "${etc}/" written "${f}")
  string(REPLACE "%i" "0" written "${written}")
  if(NOT EXISTS ${written})
    message(FATAL_ERROR "the unit reads ${f}, which gen-node-config.py does not write")
  endif()
endforeach()
file(READ ${etc}/instance-0.env env)
string(REGEX MATCHALL "\\$\\{[A-Za-z_]+\\}" vars "${exec_start}")
foreach(v IN LISTS vars)
  string(REGEX REPLACE "^\\$\\{(.*)\\}$" "\\1" v "${v}")
  if(NOT env MATCHES "(^|\n)${v}=")
    message(FATAL_ERROR "ExecStart uses \${${v}}, which instance-0.env does not define:\n${env}")
  endif()
endforeach()
message(STATUS "gen-node-config.py writes the unit's files (${etc_files}) and variables (${vars})")
