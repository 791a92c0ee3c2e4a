// Python bindings of the core's runtime: kernels, the thread pool, the
// instruction-set levels, the GEMM plans and the convolution plan's switches
// (the ProgramDesc builder, the Engine and the IPU model are in bindings.cpp).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/blas.hpp"
#include "core/gemm.hpp"
#include "core/hgemm.hpp"
#include "core/isa.hpp"
#include "core/kernel.hpp"
#include "core/parallel.hpp"
#include "kernels/conv/options.hpp"

namespace py = pybind11;

namespace ipuxl {

void bind_runtime(py::module_& m) {
  m.def("kernel_names", &KernelRegistry::names);
  m.def("gemm_kernel", []() { return std::string(gemm::kernel_name()); },
        "The core's own float32 GEMM micro-kernel: 'avx512', 'avx2' or 'portable'.");
  m.def("set_sgemm", [](uintptr_t fn) { blas::set_sgemm(reinterpret_cast<void*>(fn)); },
        "Install a cblas_sgemm-compatible function pointer (0 to remove).");
  m.def("num_threads", &num_threads, "Threads the core's kernels use.");
  m.def("set_num_threads", &set_num_threads, "Set the threads the core's kernels use.");
  m.def(
      "set_conv_options",
      [](bool no_winograd, bool no_direct, bool no_tap, bool no_cols, bool no_oc) {
        conv::ConvOptions o;
        o.no_winograd = no_winograd;
        o.no_direct = no_direct;
        o.no_tap = no_tap;
        o.no_cols = no_cols;
        o.no_oc = no_oc;
        conv::set_conv_options(o);
      },
      py::kw_only(), py::arg("no_winograd") = false, py::arg("no_direct") = false,
      py::arg("no_tap") = false, py::arg("no_cols") = false, py::arg("no_oc") = false,
      "Switches of the convolution plan (cpp/kernels/conv/options.hpp), read when a "
      "convolution's kernel is built: each keeps the plan from one form (for comparisons).");
  m.def(
      "conv_options",
      []() {
        const conv::ConvOptions o = conv::conv_options();
        py::dict d;
        d["no_winograd"] = o.no_winograd;
        d["no_direct"] = o.no_direct;
        d["no_tap"] = o.no_tap;
        d["no_cols"] = o.no_cols;
        d["no_oc"] = o.no_oc;
        return d;
      },
      "The convolution plan's switches (set_conv_options), as a dict.");
  m.def("has_blas", []() { return blas::sgemm_ptr() != nullptr; });
  m.def("contention_backoff", &contention_backoff,
        "Whether the core's jobs run on the calling thread alone for now: a recent job's "
        "caller waited long for a preempted worker (other processes keep the CPUs busy).");
  // Test hook for the contention backoff: one job of two chunks whose second
  // chunk, run by a worker, sleeps `sleep_ms` (a worker preempted mid-chunk)
  // while the caller's first chunk spins `caller_ms`, then a job of two
  // chunks and a balanced job of two units. Returns (whether a worker ran
  // the sleeping chunk, contention_backoff() after the first job, how many
  // threads ran the second job, how many the third, the caller's and the
  // worker's chunk of the first job in milliseconds as they took).
  m.def("_test_pool_straggler", [](double sleep_ms, double caller_ms) {
    if (num_threads() < 2) throw Error("_test_pool_straggler: needs 2 or more threads");
    std::atomic<bool> started{false}, on_worker{false};
    std::atomic<double> caller_took{0.0}, worker_took{0.0};
    bool backoff = false;
    std::set<std::thread::id> ran, ran_balanced;
    {
      py::gil_scoped_release nogil;
      // A backoff in progress (this hook's last call, or real contention)
      // would run the job inline: wait it out (it lasts at most 160 ms).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (contention_backoff() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const std::thread::id caller = std::this_thread::get_id();
      parallel_for_chunks(2, 2, [&](int64_t b, int64_t) {
        if (b == 0) {
          // The caller's chunk: wait (at most 2 s) until a worker has taken
          // the other, so that the caller cannot take it itself.
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
          while (!started.load() && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
          const auto t0 = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - t0 <
                 std::chrono::duration<double, std::milli>(caller_ms)) {
          }
          caller_took.store(std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0).count());
          return;
        }
        started.store(true);
        if (std::this_thread::get_id() != caller) {
          on_worker.store(true);
          const auto t0 = std::chrono::steady_clock::now();
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleep_ms));
          worker_took.store(std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0).count());
        }
      });
      backoff = contention_backoff();
      std::mutex mu;
      auto work = [&](std::set<std::thread::id>& ran) {
        {
          std::lock_guard<std::mutex> lk(mu);
          ran.insert(std::this_thread::get_id());
        }
        // 200 us of work (spun, not slept: a sleep on a VM may last much
        // longer), time for a worker to take the other chunk or piece
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (std::chrono::steady_clock::now() < until) {
        }
      };
      parallel_for_chunks(2, 2, [&](int64_t, int64_t) { work(ran); });
      parallel_for_balanced(2, 1, [&](int64_t, int64_t) { work(ran_balanced); });
    }
    return py::make_tuple(on_worker.load(), backoff, (int)ran.size(), (int)ran_balanced.size(),
                          caller_took.load(), worker_took.load());
  }, py::arg("sleep_ms"), py::arg("caller_ms") = 0.0);
  // Test/benchmark hook for the float32 GEMM: C = alpha * op(A) @ op(B) +
  // beta * C on numpy float32 matrices whose rows may be padded (strided
  // views), in place on C. impl: 0 auto, 1 core kernel, 2 installed BLAS,
  // 3 core kernel with B pre-packed once; repeat: back-to-back calls.
  m.def(
      "_test_sgemm",
      [](bool ta, bool tb, float alpha, const py::array& A, const py::array& B, float beta,
         py::array& C, int impl, int64_t repeat) {
        auto view = [](const py::array& a, const char* name, bool writable, int64_t& rows,
                       int64_t& cols, int64_t& ld) {
          if (!a.dtype().is(py::dtype::of<float>()) || a.ndim() != 2)
            throw Error(std::string("_test_sgemm: ") + name + " must be a 2-D float32 array");
          if (writable && !a.writeable())
            throw Error(std::string("_test_sgemm: ") + name + " is read-only");
          rows = a.shape(0);
          cols = a.shape(1);
          const int64_t cs = a.strides(1), rs = a.strides(0);
          if (rows * cols == 0) {
            ld = std::max<int64_t>(cols, 1);
            return;
          }
          if ((cols > 1 && cs != (int64_t)sizeof(float)) || rs % (int64_t)sizeof(float) != 0 ||
              (rows > 1 && rs / (int64_t)sizeof(float) < cols))
            throw Error(std::string("_test_sgemm: ") + name +
                        " must have unit column stride and non-overlapping rows");
          ld = rows > 1 ? rs / (int64_t)sizeof(float) : std::max<int64_t>(cols, 1);
        };
        int64_t ar, ac, lda, br, bc, ldb, cr, cc, ldc;
        view(A, "A", false, ar, ac, lda);
        view(B, "B", false, br, bc, ldb);
        view(C, "C", true, cr, cc, ldc);
        const int64_t M = ta ? ac : ar, K = ta ? ar : ac;
        const int64_t Kb = tb ? bc : br, N = tb ? br : bc;
        if (K != Kb || cr != M || cc != N)
          throw Error("_test_sgemm: shapes of op(A), op(B) and C do not match");
        if (repeat < 1) throw Error("_test_sgemm: repeat must be >= 1");
        const float* pa = static_cast<const float*>(A.data());
        const float* pb = static_cast<const float*>(B.data());
        float* pc = static_cast<float*>(C.mutable_data());
        py::gil_scoped_release release;
        blas::test_sgemm(impl, repeat, ta, tb, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc);
      },
      py::arg("ta"), py::arg("tb"), py::arg("alpha"), py::arg("A"), py::arg("B"),
      py::arg("beta"), py::arg("C"), py::arg("impl") = 0, py::arg("repeat") = 1);

  // Test/benchmark hook for the float16-partials GEMM (core/hgemm.hpp): the
  // float32 C = op(A) @ op(B) of contiguous 2-D float16 arrays, computed
  // `repeat` times.
  m.def(
      "_test_hgemm",
      [](bool ta, bool tb, const py::array& A, const py::array& B, int64_t repeat) {
        for (const py::array* a : {&A, &B})
          if (!a->dtype().is(py::dtype("float16")) || a->ndim() != 2 ||
              !(a->flags() & py::array::c_style))
            throw Error("_test_hgemm: A and B must be C-contiguous 2-D float16 arrays");
        const int64_t M = ta ? A.shape(1) : A.shape(0), K = ta ? A.shape(0) : A.shape(1);
        const int64_t Kb = tb ? B.shape(1) : B.shape(0), N = tb ? B.shape(0) : B.shape(1);
        if (K != Kb) throw Error("_test_hgemm: the contraction sizes of op(A) and op(B) differ");
        if (repeat < 1) throw Error("_test_hgemm: repeat must be >= 1");
        if (!gemm::half_partials_native())
          throw Error("_test_hgemm: needs AVX512-FP16 at the avx512 level");
        py::array_t<float> C({M, N});
        const f16* pa = static_cast<const f16*>(A.data());
        const f16* pb = static_cast<const f16*>(B.data());
        float* pc = C.mutable_data();
        {
          py::gil_scoped_release release;
          for (int64_t r = 0; r < repeat; ++r)
            gemm::hgemm_half_partials(ta, tb, M, N, K, pa, A.shape(1), pb, B.shape(1), pc, N);
        }
        return C;
      },
      py::arg("ta"), py::arg("tb"), py::arg("A"), py::arg("B"), py::arg("repeat") = 1);
  m.def("half_partials_native", &gemm::half_partials_native,
        "Whether float16 matmuls with half partials accumulate in float16 here (AVX512-FP16 at "
        "the avx512 level); elsewhere they accumulate in float32.");

  // Instruction-set dispatch (core/isa.hpp) and the GEMM plans (core/blas.hpp).
  m.def("isa", []() { return std::string(isa::level_name(isa::level())); },
        "The instruction-set level the kernels use: the configured one (IPUXL_ISA), else the "
        "best this CPU has.");
  m.def("isa_levels", []() {
        std::vector<std::string> out;
        for (isa::Level l : isa::supported()) out.push_back(isa::level_name(l));
        return out;
      }, "Levels this CPU supports, lowest first (x86: sse, avx2, avx512).");
  m.def("fma_peak", [](const std::string& level, int threads, double seconds) {
        for (isa::Level l : isa::supported())
          if (level == isa::level_name(l)) {
            py::gil_scoped_release release;
            return gemm::fma_peak_gflops((int)l, threads, seconds);
          }
        throw Error("fma_peak: '" + level + "' is not a level this CPU supports");
      }, py::arg("level"), py::arg("threads") = 1, py::arg("seconds") = 0.1,
      "Measured float32 FMA GFLOP/s of a level on `threads` threads at once.");
  m.def("fma_peak_cpu", [](const std::string& level, double seconds) {
        for (isa::Level l : isa::supported())
          if (level == isa::level_name(l)) {
            py::gil_scoped_release release;
            return gemm::fma_peak_cpu_gflops((int)l, seconds);
          }
        throw Error("fma_peak_cpu: '" + level + "' is not a level this CPU supports");
      }, py::arg("level"), py::arg("seconds") = 0.1,
      "float32 FMA GFLOP per CPU-second of a level on one thread (its CPU clock): one "
      "core's rate, not lowered by other processes' load.");
  m.def("blas_can_be_chosen", &blas::blas_can_be_chosen,
        "Whether the GEMM rules can choose OpenBLAS at the level in use (else it is not loaded).");
  m.def("sgemm_plan", &blas::sgemm_plan_name, py::arg("ta"), py::arg("tb"), py::arg("M"),
        py::arg("N"), py::arg("K"), py::arg("packed") = false,
        "Which float32 GEMM runs this shape ('core' or 'blas'): a fixed rule of the "
        "instruction-set level and the shape (cpp/core/blas.cpp), never a timing.");
}

}  // namespace ipuxl
