#include "kernel.hpp"

namespace ipuxl {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int16: return "int16";
    case DType::UInt16: return "uint16";
    case DType::Int32: return "int32";
    case DType::UInt32: return "uint32";
    case DType::Int64: return "int64";
    case DType::UInt64: return "uint64";
    case DType::Float16: return "float16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Float8_143: return "float8_143";
    case DType::Float8_152: return "float8_152";
  }
  return "?";
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

int64_t shape_nelms(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

namespace {
template <class T>
const T& get_attr(const Attrs& a, const std::string& k) {
  auto it = a.values.find(k);
  if (it == a.values.end())
    throw Error("op '" + a.op_name + "': missing attribute '" + k + "'");
  const T* v = std::get_if<T>(&it->second);
  if (!v) throw Error("op '" + a.op_name + "': attribute '" + k + "' has the wrong type");
  return *v;
}
}  // namespace

int64_t Attrs::i(const std::string& k) const {
  auto it = values.find(k);
  if (it != values.end()) {
    if (auto d = std::get_if<double>(&it->second)) return (int64_t)*d;
  }
  return get_attr<int64_t>(*this, k);
}
int64_t Attrs::i(const std::string& k, int64_t d) const { return has(k) ? i(k) : d; }
double Attrs::f(const std::string& k) const {
  auto it = values.find(k);
  if (it != values.end()) {
    if (auto v = std::get_if<int64_t>(&it->second)) return (double)*v;
  }
  return get_attr<double>(*this, k);
}
double Attrs::f(const std::string& k, double d) const { return has(k) ? f(k) : d; }
std::string Attrs::s(const std::string& k) const { return get_attr<std::string>(*this, k); }
std::string Attrs::s(const std::string& k, const std::string& d) const {
  return has(k) ? s(k) : d;
}
std::vector<int64_t> Attrs::ints(const std::string& k) const {
  auto it = values.find(k);
  if (it != values.end()) {
    if (auto v = std::get_if<int64_t>(&it->second)) return {*v};
  }
  return get_attr<std::vector<int64_t>>(*this, k);
}
std::vector<int64_t> Attrs::ints(const std::string& k, const std::vector<int64_t>& d) const {
  return has(k) ? ints(k) : d;
}
std::vector<double> Attrs::floats(const std::string& k) const {
  auto it = values.find(k);
  if (it != values.end()) {
    if (auto v = std::get_if<std::vector<int64_t>>(&it->second))
      return std::vector<double>(v->begin(), v->end());
  }
  return get_attr<std::vector<double>>(*this, k);
}

void OpDesc::fail(const std::string& msg) const {
  throw Error(type + " op '" + name + "': " + msg);
}

void OpDesc::expect_arity(size_t n_in, size_t n_out) const {
  if (in.size() != n_in || out.size() != n_out) {
    std::ostringstream os;
    os << "expected " << n_in << " inputs and " << n_out << " outputs, got " << in.size()
       << " and " << out.size();
    fail(os.str());
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i]) fail("input " + std::to_string(i) + " is missing");
}

void OpDesc::expect_same_dtype(const TensorRef& a, const TensorRef& b) const {
  if (a.dtype != b.dtype)
    fail("tensors '" + a.name + "' (" + dtype_name(a.dtype) + ") and '" + b.name + "' (" +
         dtype_name(b.dtype) + ") must have the same dtype");
}

void OpDesc::expect_shape(const TensorRef& t, const Shape& s) const {
  if (t.shape != s)
    fail("tensor '" + t.name + "' has shape " + shape_str(t.shape) + ", expected " +
         shape_str(s));
}

namespace {
std::map<std::string, KernelFactory>& registry() {
  static std::map<std::string, KernelFactory> r;
  return r;
}
}  // namespace

bool KernelRegistry::add(const std::string& op_type, KernelFactory f) {
  registry()[op_type] = std::move(f);
  return true;
}
const KernelFactory* KernelRegistry::find(const std::string& op_type) {
  auto it = registry().find(op_type);
  return it == registry().end() ? nullptr : &it->second;
}
std::vector<std::string> KernelRegistry::names() {
  std::vector<std::string> out;
  for (auto& kv : registry()) out.push_back(kv.first);
  return out;
}

}  // namespace ipuxl
