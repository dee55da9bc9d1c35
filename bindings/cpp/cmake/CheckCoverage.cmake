# CheckCoverage.cmake: a ctest script (cmake -P) failing when a function
# declared in include/leases.h is not used by leases.hpp (outside comments), so a new C
# declaration cannot ship without its C++ projection.
# Variables: C_HEADER, CPP_HEADER.
file(READ "${C_HEADER}" c_text)
file(READ "${CPP_HEADER}" cpp_text)
# Drop comments so that names mentioned in prose do not count as declarations.
string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" c_text "${c_text}")
string(REGEX REPLACE "//[^\n]*" "" cpp_text "${cpp_text}")
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_ \t\\*]*[ \t\\*](leases_[a-z0-9_]+)[ \t]*\\(" decls "${c_text}")
set(missing)
set(count 0)
foreach(decl IN LISTS decls)
  string(REGEX REPLACE ".*(leases_[a-z0-9_]+)[ \t]*\\($" "\\1" name "${decl}")
  math(EXPR count "${count} + 1")
  string(REGEX MATCH "[^A-Za-z0-9_]${name}[^A-Za-z0-9_]" used "${cpp_text}")
  if(NOT used)
    list(APPEND missing "${name}")
  endif()
endforeach()
if(count LESS 30)
  message(FATAL_ERROR "found only ${count} declarations in ${C_HEADER}: the parser is broken")
endif()
if(missing)
  list(JOIN missing ", " missing_text)
  message(FATAL_ERROR "leases.hpp does not wrap: ${missing_text}")
endif()
message(STATUS "leases.hpp calls all ${count} functions of leases.h")
