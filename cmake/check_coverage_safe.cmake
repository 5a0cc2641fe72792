# clang 14's source-based coverage (-fcoverage-mapping, the nightly's coverage build,
# scripts/nightly.d/coverage.py) crashes with "File exit not handled before popRegions"
# (llvm/llvm-project#54907) on a braced temporary compared inside a condition, as in
# `if (s.shape() != Shape{n})`; `Shape({n})` compiles. This check (ctest: coverage.braced_compare)
# fails on every `== Type{` or `!= Type{` in the code the coverage build compiles (lib/,
# reference/, cases/, fuzz/), so the night's coverage does not break again.
#
#   cmake -DSOURCE_DIR=<tree> -P cmake/check_coverage_safe.cmake
#   cmake -DSELF_TEST=ON -DBINARY_DIR=<dir> -P cmake/check_coverage_safe.cmake   (a planted one
#                                                                              must be found)
cmake_minimum_required(VERSION 3.25)

function(check_tree root out)
  set(found "")
  file(GLOB_RECURSE files RELATIVE ${root} ${root}/lib/*.[hc]pp ${root}/reference/*.[hc]pp
       ${root}/cases/*.[hc]pp ${root}/fuzz/*.[hc]pp)
  foreach(f IN LISTS files)
    file(STRINGS ${root}/${f} lines)
    set(n 0)
    foreach(line IN LISTS lines)
      math(EXPR n "${n} + 1")
      if(line MATCHES "[!=]= [A-Za-z_:]+[{]")
        list(APPEND found "${f}:${n}: a braced temporary compared (write Type({...}))")
      endif()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(SELF_TEST)
  set(t ${BINARY_DIR}/coverage_safe_self_test)
  file(REMOVE_RECURSE ${t})
  file(WRITE ${t}/lib/a.cpp "bool f(Shape s) { return s != Shape{3}; }\n")
  file(WRITE ${t}/reference/b.hpp "bool g(Shape s) { return s == Shape({3}); }\n")
  check_tree(${t} found)
  list(LENGTH found count)
  if(NOT count EQUAL 1 OR NOT found MATCHES "lib/a.cpp:1")
    message(FATAL_ERROR "self-test: expected lib/a.cpp:1 alone, found: ${found}")
  endif()
  message(STATUS "self-test: the planted braced comparison is found, Type({...}) is not")
  return()
endif()

check_tree(${SOURCE_DIR} found)
if(found)
  list(JOIN found "\n" text)
  message(FATAL_ERROR "${text}")
endif()
