// A C++ self-test of the core's arithmetic, without Python: the GEMM (every
// transpose, alpha/beta, tails; pre-packed B; the fused input-gradient
// update) and three kernels built through the registry as the engine builds
// them (Conv with padding, stride and groups; Softmax; Gelu), each against
// a plain double-precision loop. It exists to run the core where no Python
// with NumPy is at hand: a cross-compiled aarch64 build under qemu-user
// (tools/cross_check/aarch64.sh), the CI of a new architecture. Exit status
// 0 when everything agrees; each failure is printed.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/gemm.hpp"
#include "core/isa.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"

using namespace ipuxl;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL %s\n", what.c_str());
  }
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Largest |got - want| / (1 + |want|) over all elements.
double worst(const std::vector<float>& got, const std::vector<double>& want) {
  double w = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs((double)got[i] - want[i]) / (1.0 + std::fabs(want[i]));
    if (!(e <= w)) w = e;  // NaN counts as the worst
  }
  return w;
}

void test_sgemm(std::mt19937& rng) {
  const int64_t sizes[] = {1, 3, 8, 17, 33, 70};
  const int64_t ks[] = {1, 5, 16, 130};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : ks)
            for (int variant = 0; variant < 2; ++variant) {
              const float alpha = variant ? -0.75f : 1.0f, beta = variant ? 0.5f : 0.0f;
              const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
              auto A = random_floats((size_t)((ta ? K : M) * lda), rng);
              auto B = random_floats((size_t)((tb ? N : K) * ldb), rng);
              auto C = random_floats((size_t)(M * ldc), rng);
              std::vector<double> want(C.size());
              for (int64_t i = 0; i < M; ++i)
                for (int64_t j = 0; j < ldc; ++j) {
                  if (j >= N) {
                    want[(size_t)(i * ldc + j)] = C[(size_t)(i * ldc + j)];  // untouched
                    continue;
                  }
                  double s = 0.0;
                  for (int64_t k = 0; k < K; ++k) {
                    const double a = ta ? A[(size_t)(k * lda + i)] : A[(size_t)(i * lda + k)];
                    const double b = tb ? B[(size_t)(j * ldb + k)] : B[(size_t)(k * ldb + j)];
                    s += a * b;
                  }
                  want[(size_t)(i * ldc + j)] =
                      alpha * s + (beta != 0.0f ? beta * (double)C[(size_t)(i * ldc + j)] : 0.0);
                }
              gemm::sgemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(),
                          ldc);
              const double e = worst(C, want);
              check(e < 1e-5 * (double)(K + 1),
                    "sgemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" +
                        std::to_string(M) + " N=" + std::to_string(N) + " K=" +
                        std::to_string(K) + " alpha=" + std::to_string(alpha) + ": error " +
                        std::to_string(e));
            }
}

// Products whose op(A) rows hold 256K floats or more take the blocked walk
// (row tiles outer over blocks of packed panels, one k-block at a time):
// two k-blocks, a partial last panel, B packed on the fly and pre-packed.
void test_sgemm_blocked(std::mt19937& rng) {
  const int64_t M = 300, N = 70, K = 1000;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int packed = 0; packed < 2; ++packed) {
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        auto A = random_floats((size_t)(M * K), rng), B = random_floats((size_t)(K * N), rng);
        auto C = random_floats((size_t)(M * N), rng);
        std::vector<double> want(C.size());
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0.0;
            for (int64_t k = 0; k < K; ++k)
              s += (double)(ta ? A[(size_t)(k * lda + i)] : A[(size_t)(i * lda + k)]) *
                   (tb ? B[(size_t)(j * ldb + k)] : B[(size_t)(k * ldb + j)]);
            want[(size_t)(i * N + j)] = 0.5 * s - (double)C[(size_t)(i * N + j)];
          }
        if (packed) {
          gemm::PackedB pb(tb, K, N, B.data(), ldb);
          gemm::sgemm_packed(ta, M, 0.5f, A.data(), lda, pb, -1.0f, C.data(), N);
        } else {
          gemm::sgemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, -1.0f, C.data(), N);
        }
        check(worst(C, want) < 1e-5 * (double)(K + 1),
              "sgemm blocked ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                  " packed=" + std::to_string(packed));
      }
}

void test_packed(std::mt19937& rng) {
  for (int tb = 0; tb < 2; ++tb)
    for (int64_t M : {1, 9, 40}) {
      const int64_t N = 37, K = 29;
      auto A = random_floats((size_t)(M * K), rng), B = random_floats((size_t)(K * N), rng);
      gemm::PackedB pb(tb, K, N, B.data(), tb ? K : N);
      std::vector<float> C((size_t)(M * N), 0.0f);
      gemm::sgemm_packed(false, M, 1.0f, A.data(), K, pb, 0.0f, C.data(), N);
      std::vector<double> want(C.size());
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0.0;
          for (int64_t k = 0; k < K; ++k)
            s += (double)A[(size_t)(i * K + k)] *
                 (tb ? B[(size_t)(j * K + k)] : B[(size_t)(k * N + j)]);
          want[(size_t)(i * N + j)] = s;
        }
      check(worst(C, want) < 1e-4, "sgemm_packed tb=" + std::to_string(tb) + " M=" +
                                       std::to_string(M));
    }
}

void test_input_grad_update(std::mt19937& rng) {
  const int64_t Bn = 8, N = 19, M = 23;
  auto G = random_floats((size_t)(Bn * N), rng), W = random_floats((size_t)(M * N), rng);
  auto X = random_floats((size_t)(Bn * M), rng);
  std::vector<float> DX((size_t)(Bn * M), 0.0f), W0 = W;
  const float alpha = -0.1f, beta = 1.0f;
  gemm::input_grad_update(G.data(), Bn, N, W.data(), X.data(), M, DX.data(), alpha, beta, 0, M);
  std::vector<double> want_dx(DX.size()), want_w(W.size());
  for (int64_t b = 0; b < Bn; ++b)
    for (int64_t r = 0; r < M; ++r) {
      double s = 0.0;
      for (int64_t n = 0; n < N; ++n) s += (double)G[(size_t)(b * N + n)] * W0[(size_t)(r * N + n)];
      want_dx[(size_t)(b * M + r)] = s;
    }
  for (int64_t r = 0; r < M; ++r)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0.0;
      for (int64_t b = 0; b < Bn; ++b) s += (double)X[(size_t)(b * M + r)] * G[(size_t)(b * N + n)];
      want_w[(size_t)(r * N + n)] = beta * (double)W0[(size_t)(r * N + n)] + alpha * s;
    }
  check(worst(DX, want_dx) < 1e-5, "input_grad_update: DX");
  check(worst(W, want_w) < 1e-5, "input_grad_update: W");
}

// A tensor for a kernel built through the registry.
struct Buf {
  std::vector<float> v;
  TensorRef ref;
  Buf(const Shape& s, std::vector<float> data, const std::string& name) : v(std::move(data)) {
    ref.dtype = DType::Float32;
    ref.shape = s;
    ref.nelms = shape_nelms(s);
    ref.name = name;
    v.resize((size_t)ref.nelms);
    ref.data = reinterpret_cast<uint8_t*>(v.data());
  }
};

void run_kernel(const std::string& type, Attrs attrs, std::vector<Buf*> in, Buf& out) {
  const KernelFactory* f = KernelRegistry::find(type);
  if (!f) {
    check(false, "no kernel " + type);
    return;
  }
  OpDesc d;
  d.type = type;
  d.name = type + "_selftest";
  attrs.op_name = d.name;
  d.attrs = attrs;
  for (Buf* b : in) d.in.push_back(&b->ref);
  d.out.push_back(&out.ref);
  RunContext ctx;
  (*f)(d)->run(ctx);
}

void test_conv(std::mt19937& rng) {
  struct Case {
    int64_t N, C, H, W, M, K, stride, pad, groups;
  };
  const Case cases[] = {{2, 3, 13, 11, 8, 3, 1, 1, 1}, {1, 1, 28, 28, 32, 5, 1, 2, 1},
                        {2, 3, 17, 19, 16, 3, 2, 1, 1}, {1, 4, 9, 9, 6, 3, 1, 0, 2},
                        {1, 20, 8, 10, 12, 1, 1, 0, 1}, {1, 32, 12, 12, 16, 3, 1, 1, 1}};
  for (const auto& c : cases) {
    const int64_t Cg = c.C / c.groups, Mg = c.M / c.groups;
    const int64_t OH = (c.H + 2 * c.pad - c.K) / c.stride + 1;
    const int64_t OW = (c.W + 2 * c.pad - c.K) / c.stride + 1;
    Buf x({c.N, c.C, c.H, c.W}, random_floats((size_t)(c.N * c.C * c.H * c.W), rng), "x");
    Buf w({c.M, Cg, c.K, c.K}, random_floats((size_t)(c.M * Cg * c.K * c.K), rng), "w");
    Buf y({c.N, c.M, OH, OW}, {}, "y");
    Attrs a;
    a.values["strides"] = std::vector<int64_t>{c.stride, c.stride};
    a.values["pads"] = std::vector<int64_t>{c.pad, c.pad, c.pad, c.pad};
    a.values["dilations"] = std::vector<int64_t>{1, 1};
    a.values["groups"] = c.groups;
    run_kernel("Conv", a, {&x, &w}, y);
    std::vector<double> want(y.v.size());
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            const int64_t g = m / Mg;
            double s = 0.0;
            for (int64_t ci = 0; ci < Cg; ++ci)
              for (int64_t kh = 0; kh < c.K; ++kh)
                for (int64_t kw = 0; kw < c.K; ++kw) {
                  const int64_t ih = oh * c.stride - c.pad + kh, iw = ow * c.stride - c.pad + kw;
                  if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                  s += (double)x.v[(size_t)(((n * c.C + g * Cg + ci) * c.H + ih) * c.W + iw)] *
                       w.v[(size_t)(((m * Cg + ci) * c.K + kh) * c.K + kw)];
                }
            want[(size_t)(((n * c.M + m) * OH + oh) * OW + ow)] = s;
          }
    check(worst(y.v, want) < 1e-5 * (double)(Cg * c.K * c.K),
          "Conv N=" + std::to_string(c.N) + " C=" + std::to_string(c.C) + " M=" +
              std::to_string(c.M) + " k=" + std::to_string(c.K) + " stride=" +
              std::to_string(c.stride) + " groups=" + std::to_string(c.groups));
  }
}

void test_softmax_gelu(std::mt19937& rng) {
  const int64_t rows = 7, cols = 37;
  Buf x({rows, cols}, random_floats((size_t)(rows * cols), rng), "x");
  for (auto& v : x.v) v *= 8.0f;
  Buf y({rows, cols}, {}, "y");
  Attrs a;
  a.values["axis"] = int64_t(1);
  run_kernel("Softmax", a, {&x}, y);
  std::vector<double> want(y.v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -1e300, s = 0.0;
    for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, (double)x.v[(size_t)(r * cols + c)]);
    for (int64_t c = 0; c < cols; ++c) s += std::exp((double)x.v[(size_t)(r * cols + c)] - mx);
    for (int64_t c = 0; c < cols; ++c)
      want[(size_t)(r * cols + c)] = std::exp((double)x.v[(size_t)(r * cols + c)] - mx) / s;
  }
  check(worst(y.v, want) < 1e-6, "Softmax");
  Buf g({rows, cols}, {}, "g");
  run_kernel("Gelu", Attrs{}, {&x}, g);
  for (size_t i = 0; i < want.size(); ++i) {
    const double v = x.v[i];
    want[i] = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  }
  check(worst(g.v, want) < 1e-5, "Gelu (tanh form)");
}

}  // namespace

// Optional argument: the thread count (the core reads no environment; its
// Python side passes the count, this test its command line).
int main(int argc, char** argv) {
  try {
    if (argc > 1) set_num_threads(std::stoi(argv[1]));
    std::printf("ipuxl core self-test: level %s, GEMM %s, %d thread(s)\n",
                isa::level_name(isa::level()), gemm::kernel_name(), num_threads());
    std::mt19937 rng(2026);
    test_sgemm(rng);
    test_sgemm_blocked(rng);
    test_packed(rng);
    test_input_grad_update(rng);
    test_conv(rng);
    test_softmax_gelu(rng);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 2;
  }
  std::printf("%s (%d failure%s)\n", failures ? "FAILED" : "ok", failures,
              failures == 1 ? "" : "s");
  return failures ? 1 : 0;
}
