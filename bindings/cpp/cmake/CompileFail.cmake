# CompileFail.cmake: a ctest script (cmake -P) proving a unit does not compile
# for the stated reason. It first builds the unit with -DLEASES_EXPECT_COMPILES
# (the same calls with an integral count) so a typo cannot pass as a failure,
# then without it, and requires the compiler output to match EXPECT.
# Variables: CXX, SOURCE, CPP_INCLUDE, C_INCLUDE, EXPECT (regex), OUT_DIR;
# optional: EXTRA_FLAGS (a ;-list, e.g. -Werror=deprecated-declarations for a
# deprecated call) and WHY (what must not compile, for the messages).
foreach(var CXX SOURCE CPP_INCLUDE C_INCLUDE EXPECT OUT_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "CompileFail.cmake: ${var} is not set")
  endif()
endforeach()

if(NOT DEFINED WHY)
  set(WHY "a non-integral duration count")
endif()
set(flags -std=c++17 -Wall -Wextra -pedantic ${EXTRA_FLAGS} -c "-I${CPP_INCLUDE}" "-I${C_INCLUDE}")
get_filename_component(name "${SOURCE}" NAME_WE)
file(MAKE_DIRECTORY "${OUT_DIR}")

execute_process(
  COMMAND "${CXX}" ${flags} -DLEASES_EXPECT_COMPILES "${SOURCE}" -o "${OUT_DIR}/${name}.control.o"
  RESULT_VARIABLE control_rc OUTPUT_VARIABLE control_out ERROR_VARIABLE control_out)
if(NOT control_rc EQUAL 0)
  message(FATAL_ERROR "control build of ${name} failed, so the test proves nothing:\n${control_out}")
endif()

execute_process(
  COMMAND "${CXX}" ${flags} "${SOURCE}" -o "${OUT_DIR}/${name}.o"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "${name} compiled, but ${WHY} must not compile")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "${name} failed to compile, but not for the expected reason "
                      "(expected /${EXPECT}/):\n${out}")
endif()
message(STATUS "${name}: ${WHY} is rejected at compile time, as required")
