// ipuxl's PopLibs: poplin convolutions. The ConvParams transforms are
// resolved once, when the graph is built, into a table of taps: for each
// output position, the (input position, kernel position) pairs whose
// product it sums. The forward vertex reads the taps of each output element
// it owns; the weight-delta vertex reads them inverted, by kernel position.
// One vertex per tile holding part of the output; products accumulate in
// double and are stored once in the output type.
#include "../popops/builtin.hpp"
#include "../poputil/window.hpp"

#include <poplar/exceptions.hpp>
#include <poplin/ConvUtil.hpp>
#include <poplin/Convolution.hpp>
#include <popops/ScaledAdd.hpp>
#include <poputil/TileMapping.hpp>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace poplin {

// ------------------------------------------------------------ ConvParams

ConvParams::InputTransform::InputTransform(std::size_t n)
    : truncationLower(n, 0), truncationUpper(n, 0), dilation(n, 1), paddingLower(n, 0), paddingUpper(n, 0),
      flip(n, false) {}
ConvParams::InputTransform::InputTransform(std::vector<unsigned> tl, std::vector<unsigned> tu,
                                           std::vector<unsigned> d, std::vector<unsigned> pl,
                                           std::vector<unsigned> pu, std::vector<bool> f)
    : truncationLower(std::move(tl)), truncationUpper(std::move(tu)), dilation(std::move(d)),
      paddingLower(std::move(pl)), paddingUpper(std::move(pu)), flip(std::move(f)) {}
bool ConvParams::InputTransform::operator==(const InputTransform &o) const {
  return truncationLower == o.truncationLower && truncationUpper == o.truncationUpper && dilation == o.dilation &&
         paddingLower == o.paddingLower && paddingUpper == o.paddingUpper && flip == o.flip;
}
ConvParams::OutputTransform::OutputTransform(std::size_t n)
    : truncationLower(n, 0), truncationUpper(n, 0), stride(n, 1), paddingLower(n, 0), paddingUpper(n, 0) {}
ConvParams::OutputTransform::OutputTransform(std::vector<unsigned> tl, std::vector<unsigned> tu,
                                             std::vector<unsigned> s, std::vector<unsigned> pl,
                                             std::vector<unsigned> pu)
    : truncationLower(std::move(tl)), truncationUpper(std::move(tu)), stride(std::move(s)),
      paddingLower(std::move(pl)), paddingUpper(std::move(pu)) {}
bool ConvParams::OutputTransform::operator==(const OutputTransform &o) const {
  return truncationLower == o.truncationLower && truncationUpper == o.truncationUpper && stride == o.stride &&
         paddingLower == o.paddingLower && paddingUpper == o.paddingUpper;
}

ConvParams::ConvParams(poplar::Type dataType, std::size_t b, std::vector<std::size_t> field,
                       std::vector<std::size_t> kernel, std::size_t ic, std::size_t oc, std::size_t groups)
    : ConvParams(dataType, dataType, b, std::move(field), std::move(kernel), ic, oc, groups) {}
ConvParams::ConvParams(poplar::Type it, poplar::Type ot, std::size_t b, std::vector<std::size_t> field,
                       std::vector<std::size_t> kernel, std::size_t ic, std::size_t oc, std::size_t groups)
    : ConvParams(it, ot, b, field, kernel, ic, oc, groups, InputTransform(field.size()),
                 InputTransform(field.size()), OutputTransform(field.size())) {}
ConvParams::ConvParams(poplar::Type it, poplar::Type ot, std::size_t b, std::vector<std::size_t> field,
                       std::vector<std::size_t> kernel, std::size_t ic, std::size_t oc, std::size_t groups,
                       InputTransform inT, InputTransform kT, OutputTransform outT)
    : inputType(it), outputType(ot), batchSize(b), inputFieldShape(std::move(field)), kernelShape(std::move(kernel)),
      inputChannelsPerConvGroup(ic), outputChannelsPerConvGroup(oc), numConvGroups(groups),
      inputTransform(std::move(inT)), kernelTransform(std::move(kT)), outputTransform(std::move(outT)) {
  validate();
}

namespace {
using poputil::ipuxl::dilatedSize;
using poputil::ipuxl::stridedSize;
using poputil::ipuxl::truncatedSize;

std::size_t transformed(std::size_t size, const ConvParams::InputTransform &t, unsigned d) {
  std::size_t kept = truncatedSize(size, t.truncationLower[d], t.truncationUpper[d]);
  return dilatedSize(kept, t.dilation[d]) + t.paddingLower[d] + t.paddingUpper[d];
}

/// The untransformed index of transformed position `p` of dimension `d`,
/// or -1 where the transform put a zero there.
long untransform(long p, std::size_t size, const ConvParams::InputTransform &t, unsigned d) {
  std::size_t total = transformed(size, t, d);
  if (p < 0 || p >= static_cast<long>(total)) return -1;
  if (t.flip[d]) p = static_cast<long>(total) - 1 - p;
  p -= t.paddingLower[d];
  long dilated = static_cast<long>(dilatedSize(truncatedSize(size, t.truncationLower[d], t.truncationUpper[d]),
                                               t.dilation[d]));
  if (p < 0 || p >= dilated || p % t.dilation[d]) return -1;
  return p / t.dilation[d] + t.truncationLower[d];
}

void checkTransform(const char *what, const ConvParams::InputTransform &t, std::size_t n) {
  if (t.truncationLower.size() != n || t.truncationUpper.size() != n || t.dilation.size() != n ||
      t.paddingLower.size() != n || t.paddingUpper.size() != n || t.flip.size() != n)
    throw poputil::poplibs_error(std::string("poplin::ConvParams: the ") + what + " transform must have " +
                                 std::to_string(n) + " values per field (one per spatial dimension)");
  for (unsigned d : t.dilation)
    if (d == 0) throw poputil::poplibs_error(std::string("poplin::ConvParams: a ") + what + " dilation of 0");
}
} // namespace

std::size_t ConvParams::getTransformedInputSize(unsigned dim) const {
  return transformed(inputFieldShape.at(dim), inputTransform, dim);
}
std::size_t ConvParams::getTransformedKernelSize(unsigned dim) const {
  return transformed(kernelShape.at(dim), kernelTransform, dim);
}
std::size_t ConvParams::getUntransformedOutputSize(unsigned dim) const {
  std::size_t in = getTransformedInputSize(dim), k = getTransformedKernelSize(dim);
  return in >= k ? in - k + 1 : 0;
}
std::size_t ConvParams::getOutputSize(unsigned dim) const {
  const auto &t = outputTransform;
  std::size_t kept = truncatedSize(getUntransformedOutputSize(dim), t.truncationLower[dim], t.truncationUpper[dim]);
  return stridedSize(kept, t.stride[dim]) + t.paddingLower[dim] + t.paddingUpper[dim];
}
std::vector<std::size_t> ConvParams::getOutputFieldShape() const {
  std::vector<std::size_t> s;
  for (unsigned d = 0; d < getNumFieldDims(); ++d) s.push_back(getOutputSize(d));
  return s;
}

void ConvParams::validate() const {
  std::size_t n = inputFieldShape.size();
  if (kernelShape.size() != n)
    throw poputil::poplibs_error("poplin::ConvParams: the kernel has " + std::to_string(kernelShape.size()) +
                                 " dimensions, the input field " + std::to_string(n));
  if (numConvGroups == 0) throw poputil::poplibs_error("poplin::ConvParams: numConvGroups is 0");
  checkTransform("input", inputTransform, n);
  checkTransform("kernel", kernelTransform, n);
  const auto &o = outputTransform;
  if (o.truncationLower.size() != n || o.truncationUpper.size() != n || o.stride.size() != n ||
      o.paddingLower.size() != n || o.paddingUpper.size() != n)
    throw poputil::poplibs_error("poplin::ConvParams: the output transform must have " + std::to_string(n) +
                                 " values per field");
  for (unsigned s : o.stride)
    if (s == 0) throw poputil::poplibs_error("poplin::ConvParams: an output stride of 0");
}

bool ConvParams::operator==(const ConvParams &o) const {
  return inputType == o.inputType && outputType == o.outputType && batchSize == o.batchSize &&
         inputFieldShape == o.inputFieldShape && kernelShape == o.kernelShape &&
         inputChannelsPerConvGroup == o.inputChannelsPerConvGroup &&
         outputChannelsPerConvGroup == o.outputChannelsPerConvGroup && numConvGroups == o.numConvGroups &&
         inputTransform == o.inputTransform && kernelTransform == o.kernelTransform &&
         outputTransform == o.outputTransform;
}

namespace {
template <class T> std::ostream &list(std::ostream &os, const std::vector<T> &v) {
  os << "{";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os << "}";
}
} // namespace

std::ostream &operator<<(std::ostream &os, const ConvParams &p) {
  os << "ConvParams(" << p.inputType << "->" << p.outputType << ", batch " << p.batchSize << ", field ";
  list(os, p.inputFieldShape) << ", kernel ";
  list(os, p.kernelShape) << ", groups " << p.numConvGroups << ", in/out chans " << p.inputChannelsPerConvGroup
                          << "/" << p.outputChannelsPerConvGroup << ", input pad ";
  list(os, p.inputTransform.paddingLower) << "-";
  list(os, p.inputTransform.paddingUpper) << ", input dilation ";
  list(os, p.inputTransform.dilation) << ", kernel dilation ";
  list(os, p.kernelTransform.dilation) << ", stride ";
  return list(os, p.outputTransform.stride) << ")";
}

// ------------------------------------------------------------ ConvUtil

unsigned getDilatedSize(unsigned size, unsigned dilation) {
  return static_cast<unsigned>(poputil::ipuxl::dilatedSize(size, dilation));
}

unsigned getInputIndex(unsigned dim, unsigned outputIndex, unsigned kernelIndex, const ConvParams &params) {
  const auto &o = params.outputTransform;
  long out = static_cast<long>(outputIndex) - o.paddingLower[dim];
  long strided = static_cast<long>(poputil::ipuxl::stridedSize(
      poputil::ipuxl::truncatedSize(params.getUntransformedOutputSize(dim), o.truncationLower[dim], o.truncationUpper[dim]),
      o.stride[dim]));
  if (out < 0 || out >= strided) return ~0U;
  long full = out * o.stride[dim] + o.truncationLower[dim];
  // the kernel index is an untransformed one: find its transformed position
  std::size_t kt = params.getTransformedKernelSize(dim);
  for (long k = 0; k < static_cast<long>(kt); ++k) {
    if (untransform(k, params.kernelShape[dim], params.kernelTransform, dim) != static_cast<long>(kernelIndex))
      continue;
    long i = untransform(full + k, params.inputFieldShape[dim], params.inputTransform, dim);
    return i < 0 ? ~0U : static_cast<unsigned>(i);
  }
  return ~0U;
}

ConvParams getGradientParams(const ConvParams &p) {
  std::size_t n = p.getNumFieldDims();
  const auto &it = p.inputTransform, &kt = p.kernelTransform;
  for (unsigned d = 0; d < n; ++d) {
    if (it.truncationLower[d] || it.truncationUpper[d] || it.dilation[d] != 1 || it.flip[d] ||
        kt.truncationLower[d] || kt.truncationUpper[d] || kt.paddingLower[d] || kt.paddingUpper[d] || kt.flip[d] ||
        p.outputTransform.truncationLower[d] || p.outputTransform.truncationUpper[d] ||
        p.outputTransform.paddingLower[d] || p.outputTransform.paddingUpper[d])
      throw poputil::poplibs_error("poplin::getGradientParams: ipuxl supports input padding, kernel dilation and "
                                   "output stride only; got " +
                                   [&] { std::ostringstream s; s << p; return s.str(); }());
  }
  ConvParams::InputTransform bi(n), bk(n);
  ConvParams::OutputTransform bo(n);
  for (unsigned d = 0; d < n; ++d) {
    long k = static_cast<long>(p.kernelShape[d]), dil = kt.dilation[d], s = p.outputTransform.stride[d];
    long x = static_cast<long>(p.inputFieldShape[d]);
    long span = poputil::ipuxl::windowSpan(x, it.paddingLower[d], it.paddingUpper[d], k, dil);
    long rem = span >= 0 ? span % s : 0;
    long lower = dil * (k - 1) - static_cast<long>(it.paddingLower[d]);
    long upper = dil * (k - 1) - static_cast<long>(it.paddingUpper[d]) + rem;
    bi.dilation[d] = static_cast<unsigned>(s);
    // Negative padding removes output positions instead: the output gradient
    // is dilated, so its elements cannot be truncated one by one.
    bi.paddingLower[d] = static_cast<unsigned>(std::max(0L, lower));
    bi.paddingUpper[d] = static_cast<unsigned>(std::max(0L, upper));
    bo.truncationLower[d] = static_cast<unsigned>(std::max(0L, -lower));
    bo.truncationUpper[d] = static_cast<unsigned>(std::max(0L, -upper));
    bk.dilation[d] = static_cast<unsigned>(dil);
  }
  return ConvParams(p.outputType, p.inputType, p.batchSize, p.getOutputFieldShape(), p.kernelShape,
                    p.outputChannelsPerConvGroup, p.inputChannelsPerConvGroup, p.numConvGroups, bi, bk, bo);
}

// ------------------------------------------------------------ options

ConvOptions::ConvOptions(const poplar::OptionFlags &options) {
  static const char *passes[] = {"NONE", "NONE_MATMUL", "INFERENCE_FWD", "TRAINING_FWD", "TRAINING_BWD",
                                 "TRAINING_WU", "FC_INFERENCE_FWD", "FC_TRAINING_FWD", "FC_TRAINING_BWD",
                                 "FC_TRAINING_WU"};
  static const char *flags[] = {"use128BitConvUnitLoad", "enableMultiStageReduce", "enableFastReduce",
                                "enableConvDithering", "remapOutputTensor", "gatherConvOutput"};
  for (const auto &kv : options) {
    const std::string &k = kv.first, &v = kv.second;
    if (k == "availableMemoryProportion") {
      char *end = nullptr;
      double p = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end || !(p > 0 && p <= 1))
        throw poplar::invalid_option("poplin: availableMemoryProportion must be a number in (0, 1], got '" + v + "'");
      availableMemoryProportion = p;
    } else if (k == "partialsType") {
      if (v != "half" && v != "float")
        throw poplar::invalid_option("poplin: partialsType must be 'half' or 'float', got '" + v + "'");
      partialsType = v;
    } else if (k == "pass") {
      if (std::none_of(std::begin(passes), std::end(passes), [&](const char *p) { return v == p; }))
        throw poplar::invalid_option("poplin: pass '" + v + "' is not one of NONE, INFERENCE_FWD, TRAINING_FWD, "
                                     "TRAINING_BWD, TRAINING_WU, FC_* ...");
      pass = v;
    } else if (std::any_of(std::begin(flags), std::end(flags), [&](const char *f) { return k == f; })) {
      if (v != "true" && v != "false")
        throw poplar::invalid_option("poplin: option " + k + " must be 'true' or 'false', got '" + v + "'");
    } else {
      throw poplar::invalid_option("poplin: unrecognised convolution option '" + k + "'");
    }
  }
}

// ------------------------------------------------------------ vertices

namespace {
using popops::ipuxl::AnyElem;
using popops::ipuxl::load;
using popops::ipuxl::sizeOf;
using popops::ipuxl::store;
using poplar::ipuxl_detail::T_FLOAT;

/// The taps of a convolution, as CSR tables: for output field position f,
/// taps[tapBegin[f] .. tapBegin[f + 1]) are (input field position, kernel
/// position) pairs; byKernel is the same set grouped by kernel position,
/// as (output field position, input field position) pairs.
struct ConvPlan {
  int inCode, wCode, outCode;
  std::size_t batch, groups, ic, oc, inField, kSize, outField;
  std::vector<std::size_t> tapBegin;
  std::vector<std::pair<unsigned, unsigned>> taps;
  std::vector<std::size_t> kBegin;
  std::vector<std::pair<unsigned, unsigned>> byKernel;
};

std::size_t product(const std::vector<std::size_t> &v) {
  return std::accumulate(v.begin(), v.end(), std::size_t(1), std::multiplies<std::size_t>());
}

ConvPlan *makePlan(const ConvParams &p, int inCode, int wCode, int outCode) {
  auto *plan = new ConvPlan{};
  std::size_t n = p.getNumFieldDims();
  plan->inCode = inCode;
  plan->wCode = wCode;
  plan->outCode = outCode;
  plan->batch = p.batchSize;
  plan->groups = p.numConvGroups;
  plan->ic = p.inputChannelsPerConvGroup;
  plan->oc = p.outputChannelsPerConvGroup;
  plan->inField = product(p.inputFieldShape);
  plan->kSize = product(p.kernelShape);
  std::vector<std::size_t> outShape = p.getOutputFieldShape(), ktShape;
  for (unsigned d = 0; d < n; ++d) ktShape.push_back(p.getTransformedKernelSize(d));
  plan->outField = product(outShape);
  // per dimension: output position -> untransformed output position, and
  // transformed kernel position -> kernel index
  std::vector<std::vector<long>> outMap(n), kMap(n);
  for (unsigned d = 0; d < n; ++d) {
    const auto &o = p.outputTransform;
    std::size_t u = p.getUntransformedOutputSize(d), cut = std::size_t(o.truncationLower[d]) + o.truncationUpper[d];
    long strided = u > cut ? static_cast<long>((u - cut - 1) / o.stride[d] + 1) : 0;
    for (long i = 0; i < static_cast<long>(outShape[d]); ++i) {
      long j = i - o.paddingLower[d];
      outMap[d].push_back(j < 0 || j >= strided ? -1 : j * o.stride[d] + o.truncationLower[d]);
    }
    for (long k = 0; k < static_cast<long>(ktShape[d]); ++k)
      kMap[d].push_back(untransform(k, p.kernelShape[d], p.kernelTransform, d));
  }
  std::size_t ktSize = product(ktShape);
  std::vector<std::size_t> oIdx(n, 0), kIdx(n, 0);
  std::vector<std::vector<std::pair<unsigned, unsigned>>> perK(plan->kSize);
  plan->tapBegin.push_back(0);
  for (std::size_t f = 0; f < plan->outField; ++f) {
    for (std::size_t r = f, d = n; d-- > 0;) {
      oIdx[d] = r % outShape[d];
      r /= outShape[d];
    }
    bool live = true;
    for (unsigned d = 0; d < n; ++d) live = live && outMap[d][oIdx[d]] >= 0;
    for (std::size_t kf = 0; live && kf < ktSize; ++kf) {
      for (std::size_t r = kf, d = n; d-- > 0;) {
        kIdx[d] = r % ktShape[d];
        r /= ktShape[d];
      }
      std::size_t inFlat = 0, kFlat = 0;
      bool ok = true;
      for (unsigned d = 0; d < n && ok; ++d) {
        long k = kMap[d][kIdx[d]];
        long i = k < 0 ? -1 : untransform(outMap[d][oIdx[d]] + static_cast<long>(kIdx[d]), p.inputFieldShape[d],
                                          p.inputTransform, d);
        ok = k >= 0 && i >= 0;
        inFlat = inFlat * p.inputFieldShape[d] + static_cast<std::size_t>(i);
        kFlat = kFlat * p.kernelShape[d] + static_cast<std::size_t>(k);
      }
      if (!ok) continue;
      plan->taps.emplace_back(static_cast<unsigned>(inFlat), static_cast<unsigned>(kFlat));
      perK[kFlat].emplace_back(static_cast<unsigned>(f), static_cast<unsigned>(inFlat));
    }
    plan->tapBegin.push_back(plan->taps.size());
  }
  plan->kBegin.push_back(0);
  for (const auto &v : perK) {
    plan->byKernel.insert(plan->byKernel.end(), v.begin(), v.end());
    plan->kBegin.push_back(plan->byKernel.size());
  }
  return plan;
}

struct Reader {
  const char *base;
  int code;
  bool isFloat;
  Reader(const void *p, int c) : base(static_cast<const char *>(p)), code(c), isFloat(c == T_FLOAT) {}
  double operator[](std::size_t i) const {
    return isFloat ? reinterpret_cast<const float *>(base)[i] : load(code, base + i * sizeOf(code));
  }
};

/// Output elements (flat indices given by `offsets`, as (begin, size) runs)
/// of a convolution: out[b][g*OC+oc][f] = sum over taps (i, k) of f and ic
/// of in[b][g*IC+ic][i] * weights[g][oc][ic][k].
class ConvOutVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;
  poplar::Input<poplar::Vector<AnyElem>> weights;
  poplar::Output<poplar::Vector<AnyElem>> out;
  poplar::Vector<unsigned> offsets;
  unsigned long long plan;

  bool compute() {
    const ConvPlan &p = *popops::ipuxl::planOf<ConvPlan>(plan);
    Reader x(in.data(), p.inCode), w(weights.data(), p.wCode);
    char *dst = reinterpret_cast<char *>(out.data());
    std::size_t osz = sizeOf(p.outCode), o = 0;
    for (std::size_t r = 0; r + 1 < offsets.size(); r += 2)
      for (unsigned j = 0; j < offsets[r + 1]; ++j, ++o) {
        std::size_t flat = offsets[r] + j, f = flat % p.outField, c = (flat / p.outField) % (p.groups * p.oc);
        std::size_t b = flat / (p.outField * p.groups * p.oc), g = c / p.oc, oc = c % p.oc;
        double acc = 0;
        for (std::size_t t = p.tapBegin[f]; t < p.tapBegin[f + 1]; ++t) {
          std::size_t xi = (b * p.groups * p.ic + g * p.ic) * p.inField + p.taps[t].first;
          std::size_t wi = ((g * p.oc + oc) * p.ic) * p.kSize + p.taps[t].second;
          for (std::size_t ic = 0; ic < p.ic; ++ic) acc += x[xi + ic * p.inField] * w[wi + ic * p.kSize];
        }
        store(p.outCode, dst + o * osz, acc);
      }
    return true;
  }
};

/// Weight-delta elements (flat indices into [G][OC][IC][kernel...]):
/// sum over b and the taps of kernel position k of
/// zDeltas[b][g*OC+oc][f] * acts[b][g*IC+ic][i].
class ConvWeightDeltasVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> zDeltas;
  poplar::Input<poplar::Vector<AnyElem>> acts;
  poplar::Output<poplar::Vector<AnyElem>> out;
  poplar::Vector<unsigned> offsets;
  unsigned long long plan;

  bool compute() {
    const ConvPlan &p = *popops::ipuxl::planOf<ConvPlan>(plan);
    Reader dy(zDeltas.data(), p.outCode), x(acts.data(), p.inCode);
    char *dst = reinterpret_cast<char *>(out.data());
    std::size_t wsz = sizeOf(p.wCode), o = 0;
    for (std::size_t r = 0; r + 1 < offsets.size(); r += 2)
      for (unsigned j = 0; j < offsets[r + 1]; ++j, ++o) {
        std::size_t flat = offsets[r] + j, k = flat % p.kSize, ic = (flat / p.kSize) % p.ic;
        std::size_t goc = flat / (p.kSize * p.ic), g = goc / p.oc;
        double acc = 0;
        for (std::size_t b = 0; b < p.batch; ++b) {
          std::size_t dyBase = (b * p.groups * p.oc + goc) * p.outField;
          std::size_t xBase = (b * p.groups * p.ic + g * p.ic + ic) * p.inField;
          for (std::size_t t = p.kBegin[k]; t < p.kBegin[k + 1]; ++t)
            acc += dy[dyBase + p.byKernel[t].first] * x[xBase + p.byKernel[t].second];
        }
        store(p.wCode, dst + o * wsz, acc);
      }
    return true;
  }
};

void checkShape(const char *fn, const char *what, const poplar::Tensor &t, const std::vector<std::size_t> &want) {
  if (t.shape() != want) {
    std::ostringstream s;
    s << fn << ": " << what << " has shape " << t.shapeToString() << ", expected {";
    for (std::size_t i = 0; i < want.size(); ++i) s << (i ? "," : "") << want[i];
    s << "}";
    throw poputil::poplibs_error(s.str());
  }
}

std::vector<std::size_t> inputShape(const ConvParams &p) {
  std::vector<std::size_t> s{p.batchSize, p.getNumInputChans()};
  s.insert(s.end(), p.inputFieldShape.begin(), p.inputFieldShape.end());
  return s;
}
std::vector<std::size_t> outputShape(const ConvParams &p) {
  std::vector<std::size_t> s{p.batchSize, p.getNumOutputChans()};
  auto f = p.getOutputFieldShape();
  s.insert(s.end(), f.begin(), f.end());
  return s;
}
std::vector<std::size_t> weightShape(const ConvParams &p, bool transposed) {
  std::vector<std::size_t> s{p.numConvGroups, transposed ? p.inputChannelsPerConvGroup : p.outputChannelsPerConvGroup,
                             transposed ? p.outputChannelsPerConvGroup : p.inputChannelsPerConvGroup};
  s.insert(s.end(), p.kernelShape.begin(), p.kernelShape.end());
  return s;
}

/// One vertex of `type` per tile holding part of `out`, reading `a` and `b` whole.
void addPerTile(poplar::Graph &g, poplar::ComputeSet cs, const char *type, const char *aField, const poplar::Tensor &a,
                const char *bField, const poplar::Tensor &b, const poplar::Tensor &out, ConvPlan *plan,
                std::size_t macsPerElem, bool half) {
  poplar::Tensor flat = out.flatten();
  for (const auto &part : popops::ipuxl::partsByTile(g, out)) {
    std::vector<unsigned> offs;
    for (const auto &iv : part.intervals) {
      offs.push_back(static_cast<unsigned>(iv.begin()));
      offs.push_back(static_cast<unsigned>(iv.size()));
    }
    auto v = g.addVertex(cs, type);
    g.connect(v[aField], a.flatten());
    g.connect(v[bField], b.flatten());
    g.connect(v["out"], popops::ipuxl::gatherIntervals(flat, part.intervals));
    g.setInitialValue(v["offsets"], offs);
    g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
    g.setTileMapping(v, part.tile);
    // The AMP unit does 8 float (16 half) multiply-accumulates a cycle.
    unsigned macs = half ? 16 : 8;
    g.setPerfEstimate(v, 30 + (part.size * macsPerElem + macs - 1) / macs);
  }
}

poplar::Tensor linear(poplar::Graph &g, const poplar::Type &t, const std::vector<std::size_t> &shape,
                      const poplar::DebugContext &dc) {
  poplar::Tensor x = g.addVariable(t, shape, dc);
  poputil::mapTensorLinearly(g, x);
  return x;
}
} // namespace

namespace ipuxl {
void addConvolutionCodelets(poplar::Graph &graph) {
  using namespace poplar::ipuxl_detail;
  using F = ConvOutVertex;
  using W = ConvWeightDeltasVertex;
  popops::ipuxl::registerBuiltins(
      graph, {describe<F>("poplin::ipuxl::ConvOut", {field("in", &F::in), field("weights", &F::weights),
                                                     field("out", &F::out), field("offsets", &F::offsets),
                                                     field("plan", &F::plan)}),
              describe<W>("poplin::ipuxl::ConvWeightDeltas",
                          {field("zDeltas", &W::zDeltas), field("acts", &W::acts), field("out", &W::out),
                           field("offsets", &W::offsets), field("plan", &W::plan)})});
}
} // namespace ipuxl

poplar::Tensor createWeights(poplar::Graph &graph, const ConvParams &params, const poplar::DebugContext &dc,
                             const poplar::OptionFlags &options, PlanningCache *) {
  params.validate();
  ConvOptions opts(options);
  return linear(graph, params.inputType, weightShape(params, false), dc);
}

poplar::Tensor createInput(poplar::Graph &graph, const ConvParams &params, const poplar::DebugContext &dc,
                           const poplar::OptionFlags &options, PlanningCache *) {
  params.validate();
  ConvOptions opts(options);
  return linear(graph, params.inputType, inputShape(params), dc);
}

poplar::Tensor convolution(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &weights,
                           const ConvParams &params, bool transposeAndFlipWeights, poplar::program::Sequence &prog,
                           const poplar::DebugContext &dc, const poplar::OptionFlags &options, PlanningCache *) {
  const char *fn = "poplin::convolution";
  params.validate();
  ConvOptions opts(options);
  popops::ipuxl::requireCodelets(graph, "poplin::ipuxl::ConvOut", "poplin");
  checkShape(fn, "the input", in, inputShape(params));
  checkShape(fn, "the weights", weights, weightShape(params, transposeAndFlipWeights));
  if (in.elementType() != params.inputType || weights.elementType() != params.inputType)
    throw poputil::poplibs_error(std::string(fn) + ": the input (" + in.elementType().toString() + ") and weights (" +
                                 weights.elementType().toString() + ") must have the input type " +
                                 params.inputType.toString());
  poplar::Tensor w = weights;
  if (transposeAndFlipWeights) {
    w = w.dimShufflePartial({1}, {2});
    for (unsigned d = 3; d < w.rank(); ++d) w = w.reverse(d);
  }
  poplar::Tensor out = linear(graph, params.outputType, outputShape(params), poplar::DebugContext(dc, "out"));
  ConvPlan *plan = makePlan(params, in.elementType().ipuxlCode(), w.elementType().ipuxlCode(),
                            params.outputType.ipuxlCode());
  std::size_t macs = plan->outField ? plan->taps.size() * plan->ic / plan->outField : 0;
  poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, "Conv"));
  addPerTile(graph, cs, "poplin::ipuxl::ConvOut", "in", in, "weights", w, out, plan, macs,
             params.inputType == poplar::HALF);
  prog.add(poplar::program::Execute(cs));
  return out;
}

poplar::Tensor calculateWeightDeltas(poplar::Graph &graph, const poplar::Tensor &zDeltas,
                                     const poplar::Tensor &activations, const ConvParams &params,
                                     poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                     const poplar::OptionFlags &options, PlanningCache *) {
  const char *fn = "poplin::calculateWeightDeltas";
  params.validate();
  ConvOptions opts(options);
  popops::ipuxl::requireCodelets(graph, "poplin::ipuxl::ConvWeightDeltas", "poplin");
  checkShape(fn, "zDeltas", zDeltas, outputShape(params));
  checkShape(fn, "the activations", activations, inputShape(params));
  poplar::Tensor out = linear(graph, params.outputType, weightShape(params, false), poplar::DebugContext(dc, "deltas"));
  ConvPlan *plan = makePlan(params, activations.elementType().ipuxlCode(), params.outputType.ipuxlCode(),
                            zDeltas.elementType().ipuxlCode());
  std::size_t macs = plan->kSize ? plan->byKernel.size() * plan->batch / plan->kSize : 0;
  poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, "WeightDeltas"));
  addPerTile(graph, cs, "poplin::ipuxl::ConvWeightDeltas", "zDeltas", zDeltas, "acts", activations, out, plan, macs,
             params.inputType == poplar::HALF);
  prog.add(poplar::program::Execute(cs));
  return out;
}

void convolutionWeightUpdate(poplar::Graph &graph, const poplar::Tensor &zDeltas, const poplar::Tensor &weights,
                             const poplar::Tensor &activations, ConvParams params, const poplar::Tensor &scale,
                             poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                             const poplar::OptionFlags &options, PlanningCache *cache) {
  params.outputType = weights.elementType();
  poplar::Tensor d = calculateWeightDeltas(graph, zDeltas, activations, params, prog, dc, options, cache);
  popops::scaledAddTo(graph, weights, d, scale, prog, dc);
}
void convolutionWeightUpdate(poplar::Graph &graph, const poplar::Tensor &zDeltas, const poplar::Tensor &weights,
                             const poplar::Tensor &activations, ConvParams params, float scale,
                             poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                             const poplar::OptionFlags &options, PlanningCache *cache) {
  params.outputType = weights.elementType();
  poplar::Tensor d = calculateWeightDeltas(graph, zDeltas, activations, params, prog, dc, options, cache);
  popops::scaledAddTo(graph, weights, d, scale, prog, dc);
}

void weightsTransposeChansFlipXY(poplar::Graph &, const poplar::Tensor &weightsIn, const poplar::Tensor &weightsOut,
                                 poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  if (weightsIn.rank() < 3)
    throw poputil::poplibs_error("poplin::weightsTransposeChansFlipXY: the weights " + weightsIn.shapeToString() +
                                 " must be [G][OC][IC][kernel...]");
  poplar::Tensor w = weightsIn.dimShufflePartial({1}, {2});
  for (unsigned d = 3; d < w.rank(); ++d) w = w.reverse(d);
  checkShape("poplin::weightsTransposeChansFlipXY", "weightsOut", weightsOut, w.shape());
  prog.add(poplar::program::Copy(w, weightsOut, false, dc));
}

} // namespace poplin
