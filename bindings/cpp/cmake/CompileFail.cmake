# CompileFail.cmake: a ctest script (cmake -P) proving a unit does not compile
# for the stated reason. It first builds the unit with -DLEASES_EXPECT_COMPILES
# (the same calls with an integral count) so a typo cannot pass as a failure,
# then without it, and requires the compiler output to match EXPECT.
# Variables: CXX, SOURCE, CPP_INCLUDE, C_INCLUDE, EXPECT (regex), OUT_DIR.
foreach(var CXX SOURCE CPP_INCLUDE C_INCLUDE EXPECT OUT_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CompileFail.cmake: ${var} is not set")
  endif()
endforeach()

set(flags -std=c++17 -Wall -Wextra -pedantic -c "-I${CPP_INCLUDE}" "-I${C_INCLUDE}")
get_filename_component(name "${SOURCE}" NAME_WE)
file(MAKE_DIRECTORY "${OUT_DIR}")

execute_process(
  COMMAND "${CXX}" ${flags} -DLEASES_EXPECT_COMPILES "${SOURCE}" -o "${OUT_DIR}/${name}.control.o"
  RESULT_VARIABLE control_rc OUTPUT_VARIABLE control_out ERROR_VARIABLE control_out)
if(NOT control_rc EQUAL 0)
  message(FATAL_ERROR "control build of ${name} (integral count) failed, so the test proves nothing:\n${control_out}")
endif()

execute_process(
  COMMAND "${CXX}" ${flags} "${SOURCE}" -o "${OUT_DIR}/${name}.o"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${name} compiled, but a non-integral duration count must not compile")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${name} failed to compile, but not through the duration static_assert "
                      "(expected /${EXPECT}/):\n${out}")
endif()
message(STATUS "${name}: rejected at compile time by the static_assert, as required")
