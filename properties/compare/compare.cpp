#include "compare/compare.hpp"

#include "cases/npy.hpp"
#include "reference/format.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

namespace shardcheck::check {

CompareRegistry& CompareRegistry::instance() {
  static CompareRegistry registry;
  return registry;
}

void CompareRegistry::add(const std::string& op, CompareFn fn) { ops_[op] = std::move(fn); }

const CompareFn* CompareRegistry::find(const std::string& op) const {
  auto it = ops_.find(op);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> CompareRegistry::ops() const {
  std::vector<std::string> v;
  v.reserve(ops_.size());
  for (const auto& [op, fn] : ops_) v.push_back(op);
  return v;
}

void CaseReader::done() const {
  std::string unknown;
  for (const auto* list : {&m_.inputs, &m_.outputs}) {
    for (const auto& t : *list) {
      if (asked_.count(t.name) == 0) unknown += (unknown.empty() ? "" : ", ") + t.name;
    }
  }
  if (unknown.empty()) return;
  std::string known;
  for (const auto& t : s_.tensors) known += (known.empty() ? "" : ", ") + t.name;
  throw cases::CaseError(m_.file + ": tensors: " + s_.op + " has no tensor " + unknown +
                         " at this config; its tensors are " + known);
}

void require_mesh(const cases::CaseManifest& m, const spec::OpSpec& s) {
  if (m.mesh == s.mesh) return;
  const auto text = [](const std::vector<std::pair<std::string, std::size_t>>& mesh) {
    std::string t;
    for (const auto& [k, n] : mesh) t += (t.empty() ? "" : ", ") + k + "=" + std::to_string(n);
    return "{" + t + "}";
  };
  throw cases::CaseError(
      m.file + ": mesh: is " + text(m.mesh) + " but " + s.op + " at this config runs on " +
      text(s.mesh) + "; name the mesh dimensions as the op's spec does (shardcheck list --json)");
}

std::string without_profile(std::string case_text) {
  const auto at = case_text.find(" profile=");
  if (at == std::string::npos) return case_text;
  const auto end = case_text.find(' ', at + 1);
  case_text.erase(at, end == std::string::npos ? std::string::npos : end - at);
  return case_text;
}

const TensorCheck* CompareResult::baseline_of(const std::string& name) const {
  for (const auto& t : baseline) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

double baseline_error_ratio(const TensorCheck& impl, const TensorCheck& baseline) {
  if (baseline.max_abs_err == 0) {
    return impl.max_abs_err == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  }
  return impl.max_abs_err / baseline.max_abs_err;
}

double element_residual(const TensorCheck& a, const TensorCheck& b) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (a.values.size() != b.values.size() || a.bounds.size() != a.values.size()) return inf;
  double worst = 0;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const double x = a.values[i], y = b.values[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      const bool same = (std::isnan(x) && std::isnan(y)) || x == y;
      if (!same) return inf;
      continue;
    }
    const double diff = std::fabs(x - y);
    if (diff == 0) continue;
    if (!(a.bounds[i] > 0)) return inf;
    worst = std::max(worst, diff / a.bounds[i]);
  }
  return worst;
}

KeptIndices keep_along(const std::vector<std::size_t>& pieces, std::size_t per_piece,
                       const std::vector<std::size_t>& must) {
  // Each piece's required indices: two at each end, and the must indices inside it.
  std::vector<std::set<std::size_t>> kept(pieces.size());
  std::size_t need = per_piece;
  std::size_t offset = 0;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const std::size_t n = pieces[k];
    for (std::size_t j = 0; j < std::min<std::size_t>(n, 2); ++j) {
      kept[k].insert(offset + j);
      kept[k].insert(offset + n - 1 - j);
    }
    for (const std::size_t i : must) {
      if (i >= offset && i < offset + n) kept[k].insert(i);
    }
    need = std::max(need, kept[k].size());
    offset += n;
  }
  // Every piece filled to min(its size, need): evenly spaced, then the first ones left.
  KeptIndices out;
  offset = 0;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const std::size_t n = pieces[k];
    const std::size_t target = std::min(n, need);
    const std::size_t spread = target - std::min(target, kept[k].size());
    for (std::size_t j = 0; j < spread; ++j)
      kept[k].insert(offset + (2 * j + 1) * n / (2 * spread));
    for (std::size_t j = 0; j < n && kept[k].size() < target; ++j) kept[k].insert(offset + j);
    out.index.insert(out.index.end(), kept[k].begin(), kept[k].end());
    out.sizes.push_back(kept[k].size());
    offset += n;
  }
  return out;
}

std::vector<std::size_t> flat_indices(std::size_t cols_of_full,
                                      const std::vector<std::size_t>& rows,
                                      const std::vector<std::size_t>& cols) {
  std::vector<std::size_t> flat;
  flat.reserve(rows.size() * cols.size());
  for (const std::size_t i : rows) {
    for (const std::size_t j : cols) flat.push_back(i * cols_of_full + j);
  }
  return flat;
}

std::vector<std::size_t> flat_rows(std::size_t cols, const std::vector<std::size_t>& rows) {
  std::vector<std::size_t> flat;
  flat.reserve(rows.size() * cols);
  for (const std::size_t i : rows) {
    for (std::size_t j = 0; j < cols; ++j) flat.push_back(i * cols + j);
  }
  return flat;
}

std::vector<TensorCheck> cut_checks(const std::vector<TensorCheck>& given,
                                    const std::map<std::string, std::vector<std::size_t>>& kept) {
  std::vector<TensorCheck> out;
  out.reserve(given.size());
  for (const auto& t : given) {
    TensorCheck c = t;
    const auto it = kept.find(t.name);
    if (it != kept.end() && !t.values.empty()) {
      c.values.resize(it->second.size());
      c.bounds.resize(it->second.size());
      for (std::size_t k = 0; k < it->second.size(); ++k) {
        c.values[k] = t.values[it->second[k]];
        c.bounds[k] = t.bounds[it->second[k]];
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<std::vector<std::size_t>> worst_rows(const CaseVerdict& given,
                                                   const std::vector<std::string>& row_tensors) {
  std::vector<std::size_t> rows;
  for (const auto& t : given.tensors) {
    if (std::find(row_tensors.begin(), row_tensors.end(), t.name) == row_tensors.end()) {
      return std::nullopt;
    }
    if (!t.worst_index.empty() && !t.values.empty()) rows.push_back(t.worst_index[0]);
  }
  return rows;
}

KeptIndices keep_rows(const std::vector<std::size_t>& pieces, const DiagnosisCutSize& size,
                      const std::vector<std::size_t>& worst) {
  return keep_along(
      pieces, std::max<std::size_t>(4, (size.rows + pieces.size() - 1) / pieces.size()), worst);
}

std::string kept_tokens_words(std::size_t kept, std::size_t tokens,
                              const std::vector<std::string>& whole) {
  std::string words = std::to_string(kept) + " of " + std::to_string(tokens) +
                      " tokens, every shard boundary and the worst elements kept";
  for (std::size_t k = 0; k < whole.size(); ++k) {
    words += (k == 0 ? "; " : k + 1 == whole.size() ? " and " : ", ") + whole[k];
  }
  if (!whole.empty()) words += " on all " + std::to_string(tokens);
  return words;
}

ExpectedTensor select_expected(const ExpectedTensor& x, const std::vector<std::size_t>& kept,
                               const Shape& shape) {
  return {select_flat(x.value, kept, shape), select_flat(x.bound, kept, shape)};
}

std::vector<std::string> diagnosis_lines(const CompareResult& r) {
  std::vector<std::string> out;
  if (r.verdict.pass() || r.signatures_tried == 0) return out;
  const std::string cut = r.diagnosis_cut.empty() ? "" : "; diagnosed on " + r.diagnosis_cut;
  for (const auto& d : r.diagnosis) {
    std::ostringstream os;
    os.precision(2);
    os << (d.unexplained.empty() ? "matches " : "partly matches ") << d.signature;
    if (d.rank >= 0) os << " at rank " << d.rank;
    os << " (residual " << d.residual << " of the bound; explains ";
    for (std::size_t k = 0; k < d.explained.size(); ++k) os << (k ? ", " : "") << d.explained[k];
    if (!d.unexplained.empty()) {
      os << "; not ";
      for (std::size_t k = 0; k < d.unexplained.size(); ++k) {
        os << (k ? ", " : "") << d.unexplained[k];
      }
    }
    os << cut << "): " << d.description;
    out.push_back(os.str());
  }
  if (out.empty()) {
    out.push_back("no known signature (of " + std::to_string(r.signatures_tried) + cut + ")");
  }
  return out;
}

std::string default_contract(DType t, std::optional<DType> accumulate) {
  const DType a = accumulate.value_or(acc_dtype(t));
  const std::string store(name(t));
  return std::string(a == acc_dtype(t) ? "default" : "declared accumulate") +
         ": inputs and outputs in " + store + ", every dot product and sum accumulated in " +
         std::string(name(a)) + " in any order and rounded once to " + store +
         " (docs/tolerances.md)";
}

std::optional<DType> require_accumulate_holds(const cases::CaseManifest& m) {
  if (!m.accumulate) return std::nullopt;
  // Each format holds the values of those before it in its list, and rounds no finer.
  const auto holds = [](DType a, DType t) {
    switch (t) {
      case DType::bfloat16:
        return a == DType::bfloat16 || a == DType::float32 || a == DType::float64;
      case DType::float16: return a == DType::float16 || a == DType::float32 || a == DType::float64;
      case DType::float32: return a == DType::float32 || a == DType::float64;
      default: return a == t;
    }
  };
  if (holds(*m.accumulate, m.dtype)) return m.accumulate;
  std::string takes;
  for (const DType a : {DType::bfloat16, DType::float16, DType::float32, DType::float64}) {
    if (holds(a, m.dtype)) takes += (takes.empty() ? "" : ", ") + std::string(name(a));
  }
  throw cases::CaseError(m.file + ": accumulate: is " + std::string(name(*m.accumulate)) +
                         " but an accumulator must hold every " + std::string(name(m.dtype)) +
                         " value and round no finer; give one of " + takes +
                         " (docs/compare.md, \"Contract\")");
}

std::optional<DType> require_accumulate_bounded(const cases::CaseManifest& m, std::size_t longest,
                                                const std::string& longest_words) {
  const auto accumulate = require_accumulate_holds(m);
  if (!accumulate) return accumulate;
  const std::string a(name(*accumulate));
  const int p = reference::format_of(*accumulate).precision;
  const std::size_t most = (std::size_t{1} << static_cast<unsigned>(p)) - 1;
  if (longest > most) {
    throw cases::CaseError(m.file + ": accumulate: is " + a + " but the longest contraction has " +
                           std::to_string(longest) + " terms (" + longest_words +
                           ") and a dot accumulated in " + a +
                           " has an a-priori bound only up to " + std::to_string(most) +
                           " terms (γ_n needs n·u < 1, u = 2^-" + std::to_string(p) +
                           "); give a wider accumulator, or omit the field (docs/compare.md, "
                           "\"Contract\")");
  }
  return accumulate;
}

CompareResult compare_case(const cases::CaseManifest& m, const CompareOptions& options) {
  register_builtin_compares();
  const CompareFn* fn = CompareRegistry::instance().find(m.op);
  if (fn == nullptr) {
    std::string ops;
    for (const auto& o : CompareRegistry::instance().ops()) ops += (ops.empty() ? "" : ", ") + o;
    throw cases::CaseError(m.file + ": op: \"" + m.op +
                           "\" is not an op compare knows; give one of " + ops);
  }
  return (*fn)(m, options);
}

}  // namespace shardcheck::check
