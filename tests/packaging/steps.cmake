# What both packaging scripts (install_test.cmake, deb_test.cmake) need:
#   infer_require(script VAR...)  stops unless every -D VAR=... was given;
#   step(what COMMAND...)         runs the command; on failure stops with its
#                                 output and errors, else leaves its standard
#                                 output in step_output.

function(infer_require script)
  foreach(v ${ARGN})
    if(NOT ${v})
      message(FATAL_ERROR "${script}: -D ${v}=... is required")
    endif()
  endforeach()
endfunction()

macro(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE step_rc OUTPUT_VARIABLE step_output
                  ERROR_VARIABLE step_errors TIMEOUT 240)
  if(NOT step_rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${step_rc}):\n${step_output}\n${step_errors}")
  endif()
endmacro()
