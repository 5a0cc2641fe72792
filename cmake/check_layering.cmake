# The layering rule, checked on every project #include (ctest: layering.includes):
#
#   lib/         includes only lib/ headers: never reference/ or properties/ (engine/, suites/,
#                generators/, testing/), reports/ or tools/;
#     lib/runtime/  only runtime/ and tensor/ (the bottom layer: no layout, ops or budget)
#     lib/layout/   no ops/ or budget/
#     lib/ops/      no budget/ (the ops take their collective buffers from ops/workspace.hpp,
#                   which counts their bytes; budget/ sits above and reads the count)
#     lib/ops/<family>/<family>_config.hpp  (a family's configuration: enums and structs of
#                   fields, no op logic) only tensor/, runtime/dtype.hpp,
#                   runtime/enum_names.hpp (its enums' names: data) and other families'
#                   ops/<f>/<f>_config.hpp (a family composed of others, as the model is of the
#                   norm's and the MLP's, names their configurations; data on data), and the
#                   standard library: nothing that carries behaviour, not even layout/ or the
#                   runtime's Algorithm, since the reference includes it;
#   reference/   includes only reference/, tensor/, runtime/dtype.hpp (the value types the
#                dense ops need), runtime/enum_names.hpp (the configuration enums' names) and a
#                family's data-only ops/<family>/<family>_config.hpp:
#                never op code (any other ops/ header), layout/, budget/ or another runtime
#                header.
#
# Why the reference may share the configuration types but nothing else: a configuration type is
# the question both sides answer (which mask, which norm, which reduction), declared once so
# the library, the reference and the suite cannot drift apart (no parallel enums, no conversion
# helpers). It holds no computation, so sharing it shares no bug. What a configuration MEANS (the
# visibility rule of a mask, the formula of a norm kind, the loss of a reduction) stays written
# twice, independently: in the library's op code and in reference/, which never includes op
# code, so the oracle cannot share a bug with the library it judges.
#
# CMake targets keep the link graph in order; this catches the header includes the link graph
# cannot see (a header-only reach upward compiles and links fine).
#
#   cmake -DSOURCE_DIR=<tree> -P cmake/check_layering.cmake
# Fails (FATAL_ERROR) with every violating file:line and the rule it breaks.
# -DSELF_TEST=ON writes a small tree with one violation of each rule to BINARY_DIR and checks that
# each one is reported (layering.self_test: the check can fail).
cmake_minimum_required(VERSION 3.25)

# check_tree(<root> <out-var>): the violations in <root>, one "file:line: rule" per entry.
function(check_tree root out)
  set(violations "")
  file(GLOB_RECURSE files RELATIVE ${root} ${root}/lib/*.hpp ${root}/lib/*.cpp
       ${root}/reference/*.hpp ${root}/reference/*.cpp)
  foreach(f IN LISTS files)
    file(STRINGS ${root}/${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
      set(rule "")
      # ops/<family>/<family>_config.hpp, the family's name twice (CMake regexes have no
      # back-references: compare the two captures).
      set(config_header OFF)
      if(inc MATCHES "^ops/([a-z0-9_]+)/([a-z0-9_]+)_config\\.hpp$"
         AND CMAKE_MATCH_1 STREQUAL CMAKE_MATCH_2)
        set(config_header ON)
      endif()
      if(f MATCHES "^lib/")
        if(inc MATCHES "^(reference|engine|suites|generators|testing|reports|tools|properties|cases|compare)/")
          set(rule "lib/ must not include reference/, properties/, cases/, reports/ or tools/")
        elseif(f MATCHES "^lib/runtime/" AND NOT inc MATCHES "^(runtime|tensor)/")
          set(rule "lib/runtime/ may include only runtime/ and tensor/")
        elseif(f MATCHES "^lib/layout/" AND inc MATCHES "^(ops|budget)/")
          set(rule "lib/layout/ must not include ops/ or budget/")
        elseif(f MATCHES "^lib/ops/[^/]+/[^/]+_config\\.hpp$"
               AND NOT inc MATCHES "^(tensor/|runtime/(dtype|enum_names)\\.hpp$)" AND NOT config_header)
          set(rule "lib/ops/*/*_config.hpp (data only) may include only tensor/, runtime/dtype.hpp, runtime/enum_names.hpp, ops/<family>/<family>_config.hpp")
        elseif(f MATCHES "^lib/ops/" AND inc MATCHES "^budget/")
          set(rule "lib/ops/ must not include budget/")
        endif()
      elseif(f MATCHES "^reference/")
        if(NOT inc MATCHES "^(reference/|tensor/|runtime/(dtype|enum_names)\\.hpp$)" AND NOT config_header)
          set(rule "reference/ may include only reference/, tensor/, runtime/dtype.hpp, runtime/enum_names.hpp, ops/<family>/<family>_config.hpp")
        endif()
      endif()
      if(rule)
        list(APPEND violations "${f}: #include \"${inc}\": ${rule}")
      endif()
    endforeach()
  endforeach()
  set(${out} "${violations}" PARENT_SCOPE)
endfunction()

if(SELF_TEST)
  set(root ${BINARY_DIR}/layering_self_test)
  file(REMOVE_RECURSE ${root})
  file(WRITE ${root}/lib/ops/a.cpp "#include \"reference/linear/linear.hpp\"\n")
  file(WRITE ${root}/lib/ops/b.cpp "#include \"engine/suite.hpp\"\n")
  file(WRITE ${root}/lib/runtime/c.hpp "#include \"layout/placement.hpp\"\n")
  file(WRITE ${root}/lib/layout/d.hpp "#include \"ops/linear/linear.hpp\"\n")
  file(WRITE ${root}/lib/ops/g.cpp "#include \"budget/live_bytes.hpp\"\n")
  file(WRITE ${root}/reference/e.hpp "#include \"ops/linear/linear.hpp\"\n")
  file(WRITE ${root}/reference/f.hpp "#include \"runtime/communicator.hpp\"\n")
  # Only a family's own config header: not another header named *_config.hpp.
  file(WRITE ${root}/reference/g.hpp "#include \"ops/norm/linear_config.hpp\"\n")
  file(WRITE ${root}/lib/ops/norm/norm_config.hpp
       "#include \"layout/split_policy.hpp\"\n#include \"runtime/communicator.hpp\"\n"
       "#include \"ops/linear/linear.hpp\"\n#include \"tensor/tensor.hpp\"\n")
  file(WRITE ${root}/reference/ok.hpp
       "#include \"runtime/dtype.hpp\"\n#include \"tensor/tensor.hpp\"\n"
       "#include \"ops/norm/norm_config.hpp\"\n")
  file(WRITE ${root}/lib/ops/ok.cpp "#include \"layout/placement.hpp\"\n#include \"ops/workspace.hpp\"\n")
  file(WRITE ${root}/lib/budget/ok.cpp "#include \"ops/workspace.hpp\"\n")
  file(WRITE ${root}/lib/ops/vocab/vocab_config.hpp
       "#include \"runtime/dtype.hpp\"\n#include \"tensor/tensor.hpp\"\n")
  # A config composed of other families' configs is data on data: allowed.
  file(WRITE ${root}/lib/ops/model/model_config.hpp
       "#include \"ops/norm/norm_config.hpp\"\n#include \"tensor/tensor.hpp\"\n")
  file(WRITE ${root}/lib/ops/vocab/vocab.hpp
       "#include \"ops/vocab/vocab_config.hpp\"\n#include \"layout/split_policy.hpp\"\n")
  check_tree(${root} found)
  list(LENGTH found n)
  if(NOT n EQUAL 11)
    message(FATAL_ERROR "layering self-test: expected 11 violations, found ${n}:\n${found}")
  endif()
  message(STATUS "layering self-test: all 11 planted violations reported")
  return()
endif()

check_tree(${SOURCE_DIR} found)
if(found)
  list(JOIN found "\n  " text)
  message(FATAL_ERROR "layering: includes that reach across layers:\n  ${text}\n"
                      "Move the shared declaration down to the lower layer, or the code up.")
endif()
message(STATUS "layering: every #include of lib/ and reference/ respects the layers")
