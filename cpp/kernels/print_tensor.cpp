// PrintTensor: copies its input to its output and, when `print_self` is set,
// writes the tensor to stderr in the layout of poplar's PrintTensor with a
// PrintTensorFmt (as PopART's PrintTensorOpx does):
//
//   title: [
//    [1.4962566 1.7682219]
//    [1.0884774 1.1320305]
//   ]
//
// * A rank-0 tensor prints as `title: v`, an empty one as `title: []`, a
//   1-D one on the title line. Each nesting level indents by one space; the
//   innermost dimension is printed on one line.
// * Summarisation: when summarise_threshold > 0 and the tensor has more
//   elements, every dimension longer than 2 * edge_items shows its first and
//   last edge_items entries with `...` between them.
// * Line splitting: when max_line_width > 0, a line that would exceed it is
//   broken after a separator (a space separator is dropped there);
//   continuation lines are indented two spaces deeper than the line's
//   bracket.
// * Numbers: with digits > 0, all printed values share one format and are
//   right-aligned to a common width. Floats use
//     fixed:      digits significant digits for the largest magnitude
//                 (decimals = digits - integer digits, at least 0);
//     scientific: digits - 1 decimals, exponent with at least two digits;
//     auto:       scientific when the largest magnitude >= 10^digits or the
//                 smallest non-zero magnitude < 1e-4, else fixed;
//     none (or digits == 0): each value on its own with %.{digits}g (%g
//                 when digits == 0), unaligned.
//   Integers print exactly, bool as 0/1, non-finite values as nan/inf/-inf.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "../core/fp8.hpp"

namespace ipuxl {
namespace {

struct Fmt {
  std::string title;
  int64_t threshold = 1000, edge = 3, width = 75, digits = 8;
  std::string float_format = "auto";
  std::string sep = " ", open = "[", close = "]";
};

// Element index lists per dimension; -1 marks the ellipsis.
std::vector<std::vector<int64_t>> shown_indices(const Shape& shape, bool summarise, int64_t edge) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t n : shape) {
    std::vector<int64_t> ix;
    if (summarise && n > 2 * edge) {
      for (int64_t i = 0; i < edge; ++i) ix.push_back(i);
      ix.push_back(-1);
      for (int64_t i = n - edge; i < n; ++i) ix.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) ix.push_back(i);
    }
    out.push_back(std::move(ix));
  }
  return out;
}

std::string printf_str(const char* fmt, int prec, double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, prec, v);
  return buf;
}

std::string nonfinite(double v) {
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

// Formats the values that will be shown (floats), all in one style.
std::vector<std::string> format_floats(const std::vector<double>& vals, const Fmt& f) {
  std::vector<std::string> out;
  out.reserve(vals.size());
  std::string mode = f.float_format;
  if (f.digits <= 0) mode = "none";
  double maxabs = 0.0, minnz = INFINITY;
  for (double v : vals) {
    if (!std::isfinite(v)) continue;
    const double a = std::fabs(v);
    maxabs = std::max(maxabs, a);
    if (a > 0.0) minnz = std::min(minnz, a);
  }
  const int digits = (int)std::min<int64_t>(f.digits, 60);
  if (mode == "auto") {
    const bool sci = maxabs >= std::pow(10.0, (double)digits) || minnz < 1e-4;
    mode = sci ? "scientific" : "fixed";
  }
  int decimals = 0;
  if (mode == "fixed") {
    const int int_digits = maxabs < 1.0 ? 1 : (int)std::floor(std::log10(maxabs)) + 1;
    decimals = std::max(digits - int_digits, 0);
  }
  for (double v : vals) {
    if (!std::isfinite(v)) {
      out.push_back(nonfinite(v));
    } else if (mode == "fixed") {
      out.push_back(printf_str("%.*f", decimals, v));
    } else if (mode == "scientific") {
      out.push_back(printf_str("%.*e", std::max(digits - 1, 0), v));
    } else {
      out.push_back(f.digits > 0 ? printf_str("%.*g", digits, v) : printf_str("%.*g", 6, v));
    }
  }
  return out;
}

class Printer {
 public:
  Printer(const Fmt& f, const Shape& shape, std::vector<std::vector<int64_t>> ix,
          std::vector<std::string> cells)
      : f_(f), shape_(shape), ix_(std::move(ix)), cells_(std::move(cells)) {}

  std::string run() {
    out_ = f_.title + ": ";
    if (shape_.empty()) {
      out_ += cells_.empty() ? "" : cells_[0];
      out_ += "\n";
      return out_;
    }
    block(0, 0, true);
    return out_;
  }

 private:
  // Prints dimension `dim` at nesting depth `depth`; `first` means the line
  // already holds the title prefix.
  void block(size_t dim, int64_t depth, bool first) {
    const std::string ind = first ? "" : std::string((size_t)depth, ' ');
    if (dim + 1 == shape_.size()) {
      line(ind, depth, first);
      return;
    }
    out_ += ind + f_.open + "\n";
    for (int64_t i : ix_[dim]) {
      if (i < 0) {
        out_ += std::string((size_t)depth + 1, ' ') + "...\n";
        continue;
      }
      block(dim + 1, depth + 1, false);
    }
    out_ += std::string((size_t)depth, ' ') + f_.close + "\n";
  }

  void line(const std::string& ind, int64_t depth, bool first) {
    std::vector<std::string> toks;
    for (int64_t i : ix_.back()) toks.push_back(i < 0 ? std::string("...") : cells_[next_++]);
    // The title prefix counts toward the width of the first line.
    std::string cur = (first ? out_ : std::string()) + ind + f_.open;
    if (first) out_.clear();
    const std::string cont((size_t)depth + 2, ' ');
    for (size_t k = 0; k < toks.size(); ++k) {
      const bool last = k + 1 == toks.size();
      if (k == 0) {
        cur += toks[k];
      } else {
        const size_t need =
            cur.size() + f_.sep.size() + toks[k].size() + (last ? f_.close.size() : 0);
        if (f_.width > 0 && need > (size_t)f_.width) {
          // A whitespace separator is not left dangling at the line end.
          out_ += cur + (f_.sep == " " ? std::string() : f_.sep) + "\n";
          cur = cont + toks[k];
        } else {
          cur += f_.sep + toks[k];
        }
      }
    }
    out_ += cur + f_.close + "\n";
  }

  const Fmt& f_;
  Shape shape_;
  std::vector<std::vector<int64_t>> ix_;
  std::vector<std::string> cells_;
  size_t next_ = 0;
  std::string out_;
};

// Visits the shown elements in row-major order, calling fn(flat_index).
template <class F>
void visit_shown(const Shape& shape, const std::vector<std::vector<int64_t>>& ix, F&& fn) {
  const size_t rank = shape.size();
  if (rank == 0) {
    fn((int64_t)0);
    return;
  }
  std::vector<int64_t> strides = contiguous_strides(shape);
  std::vector<size_t> pos(rank, 0);
  for (size_t d = 0; d < rank; ++d)
    if (ix[d].empty()) return;
  while (true) {
    bool skip = false;
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t i = ix[d][pos[d]];
      if (i < 0) { skip = true; break; }
      flat += i * strides[d];
    }
    if (!skip) fn(flat);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++pos[d] < ix[d].size()) break;
      pos[d] = 0;
      if (d == 0) return;
    }
  }
}

std::string format_tensor(const TensorRef& t, const Fmt& f) {
  if (t.nelms == 0) return f.title + ": " + f.open + f.close + "\n";
  const bool summarise = f.threshold > 0 && t.nelms > f.threshold;
  auto ix = shown_indices(t.shape, summarise, std::max<int64_t>(f.edge, 0));
  std::vector<std::string> cells;
  if (dtype_is_fp8(t.dtype)) {
    // The stored values (log2 scale 0), decoded: no dispatch macro has the
    // float8 types.
    const auto& table = t.dtype == DType::Float8_143 ? fp8::table143() : fp8::table152();
    std::vector<double> vals;
    visit_shown(t.shape, ix, [&](int64_t i) { vals.push_back((double)table.v[t.data[i]]); });
    cells = format_floats(vals, f);
  } else if (dtype_is_float(t.dtype)) {
    std::vector<double> vals;
    IPUXL_DISPATCH_FLOAT(t.dtype, {
      const scalar_t* p = t.as<scalar_t>();
      visit_shown(t.shape, ix, [&](int64_t i) { vals.push_back((double)(ct_t<scalar_t>)p[i]); });
    });
    cells = format_floats(vals, f);
  } else {
    IPUXL_DISPATCH_ALL(t.dtype, {
      const scalar_t* p = t.as<scalar_t>();
      visit_shown(t.shape, ix, [&](int64_t i) {
        if constexpr (std::is_same_v<scalar_t, bool>) {
          cells.push_back(p[i] ? "1" : "0");
        } else if constexpr (std::is_signed_v<scalar_t>) {
          cells.push_back(std::to_string((long long)p[i]));
        } else {
          cells.push_back(std::to_string((unsigned long long)p[i]));
        }
      });
    });
  }
  // Align every value to a common width unless alignment is disabled.
  if (f.digits > 0 && (f.float_format != "none" || !dtype_is_float(t.dtype))) {
    size_t w = 0;
    for (auto& c : cells) w = std::max(w, c.size());
    for (auto& c : cells)
      if (c.size() < w) c.insert(0, w - c.size(), ' ');
  }
  return Printer(f, t.shape, std::move(ix), std::move(cells)).run();
}

std::unique_ptr<Kernel> print_tensor_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* o = d.out[0];
  d.expect_same_dtype(*in, *o);
  d.expect_shape(*o, in->shape);
  Fmt f;
  f.title = d.attrs.s("title");
  f.threshold = d.attrs.i("summarise_threshold", 1000);
  f.edge = d.attrs.i("edge_items", 3);
  f.width = d.attrs.i("max_line_width", 75);
  f.digits = d.attrs.i("digits", 8);
  f.float_format = d.attrs.s("float_format", "auto");
  f.sep = d.attrs.s("separator", " ");
  f.open = d.attrs.s("open_bracket", "[");
  f.close = d.attrs.s("close_bracket", "]");
  if (f.float_format != "auto" && f.float_format != "fixed" && f.float_format != "scientific" &&
      f.float_format != "none")
    d.fail("unknown float_format '" + f.float_format + "'");
  if (f.sep.size() != 1 || f.open.size() != 1 || f.close.size() != 1)
    d.fail("separator and brackets must be single characters");
  if (f.threshold < 0 || f.edge < 0 || f.width < 0 || f.digits < 0)
    d.fail("summarise_threshold, edge_items, max_line_width and digits must be >= 0");
  const bool print_self = d.attrs.i("print_self", 1) != 0;
  return make_kernel(
      [in, o, f, print_self](RunContext&) {
        // memmove and formatting from the output: safe even if the memory
        // planner gave the output storage that overlaps the input's.
        if (in->data != o->data) std::memmove(o->data, in->data, o->nbytes());
        if (!print_self) return;
        const std::string s = format_tensor(*o, f);
        std::fwrite(s.data(), 1, s.size(), stderr);
        std::fflush(stderr);
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("PrintTensor", print_tensor_factory);

}  // namespace ipuxl
