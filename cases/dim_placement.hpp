// A placement written per dimension, the way trainers' dump tools annotate a tensor (sglang's
// dump comparator writes `b s(cp,zigzag) h(tp,partial) d`): one token per dimension of the
// tensor, in order, each a name and, in parentheses, the mesh axes that act on that dimension.
//
//   placement := dim (' '+ dim)*
//   dim       := name | name '(' item (',' item)* ')'
//   name      := [a-z_][a-z0-9_]*            a label for the reader ("b", "s", "h", "d", "ffn")
//   item      := axis | 'zigzag' | 'partial'
//   axis      := [a-z_][a-z0-9_]*            a mesh axis of the op ("tp", "cp")
//
// Meaning, per mesh axis a of the op:
//   a inside a dimension's parentheses            Shard(that dimension) over a (DTensor's S(d))
//   ... with `zigzag` in the same parentheses     and the pieces follow the zigzag layout
//                                                 (rank j holds chunks j and 2·P − 1 − j)
//   ... with `partial` in the same parentheses    Partial over a: each rank holds a full-shape
//                                                 term of a sum (P(sum)); the dimension it is
//                                                 written on is only where the dump put it
//   a nowhere                                     Replicate over a (R)
// An axis may be named once in a whole placement. How many elements each rank holds (the split
// policy: chunk, balanced, explicit) is not written: it is the op's configuration, and each
// rank's piece is checked against the local shape the op's spec gives it.
//
// This file reads the text only; which axes the op has, and whether the placement is the op's,
// is properties/compare/case_reader.hpp's business (docs/case-format.md, "Per-dimension
// placements").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shardcheck::cases {

struct DimPlacement {
  struct Dim {
    std::string name;               // "s"
    std::vector<std::string> axes;  // "cp", in the order written
    bool zigzag = false;
    bool partial = false;
  };
  std::vector<Dim> dims;  // one per dimension of the tensor

  // The dimension whose parentheses name `axis`, or -1 when no dimension does.
  int dim_of(std::string_view axis) const;
  // As written, normalized: one space between dimensions, "s(cp,zigzag)".
  std::string to_string() const;
};

// Whether `text` is written per dimension (its first character is a lowercase letter or '_'),
// not in DTensor's words ("S(0)", "R", "P(sum)", "[S(1), R]", which begin in upper case or '[').
bool is_per_dimension(std::string_view text);

// @throws std::invalid_argument with what is wrong and where (the character's offset), e.g.
// "at character 5: expected ')' or ',' after axis cp". Refused: an empty text, a name or axis that
// is not [a-z_][a-z0-9_]*, empty parentheses, an axis named twice, `zigzag` or `partial` twice
// in one dimension or without an axis beside it, `zigzag` with `partial`.
DimPlacement parse_dim_placement(std::string_view text);

}  // namespace shardcheck::cases
