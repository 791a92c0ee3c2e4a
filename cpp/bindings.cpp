// Python bindings of the core: a ProgramDesc builder and the Engine.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/blas.hpp"
#include "core/engine.hpp"
#include "core/gemm.hpp"
#include "core/isa.hpp"
#include "core/parallel.hpp"

namespace py = pybind11;
using namespace ipuxl;

namespace {

DType to_dtype(int code) {
  if (!dtype_is_valid(code)) throw Error("invalid dtype code " + std::to_string(code));
  return static_cast<DType>(code);
}

AttrValue to_attr(const std::string& key, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return (int64_t)v.cast<bool>();
  if (py::isinstance<py::int_>(v)) return v.cast<int64_t>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    auto seq = v.cast<py::sequence>();
    bool all_int = true;
    for (auto item : seq)
      if (!(py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item))) all_int = false;
    if (all_int) {
      std::vector<int64_t> out;
      for (auto item : seq) out.push_back(item.cast<int64_t>());
      return out;
    }
    std::vector<double> out;
    for (auto item : seq) out.push_back(item.cast<double>());
    return out;
  }
  throw Error("attribute '" + key + "' has an unsupported type " +
              py::str(py::type::of(v)).cast<std::string>());
}

// A host array passed to the core: must be C-contiguous with the expected size.
py::buffer_info checked_buffer(const py::array& a, size_t min_bytes, bool writable,
                               const std::string& what) {
  if (!(a.flags() & py::array::c_style))
    throw Error(what + ": array must be C-contiguous");
  if (writable && !a.writeable()) throw Error(what + ": array is read-only");
  py::buffer_info info = a.request(writable);
  size_t nbytes = (size_t)info.size * (size_t)info.itemsize;
  if (nbytes < min_bytes)
    throw Error(what + ": array has " + std::to_string(nbytes) + " bytes, need at least " +
                std::to_string(min_bytes));
  return info;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "ipuxl C++ core: lowering, memory planning and the IPU-model engine";

  static py::exception<NotImplemented> not_impl(m, "CoreNotImplementedError",
                                                PyExc_NotImplementedError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NotImplemented& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const RunError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<ProgramDesc, std::shared_ptr<ProgramDesc>>(m, "ProgramDesc")
      .def(py::init<>())
      .def("add_graph", &ProgramDesc::add_graph)
      .def(
          "add_tensor",
          [](ProgramDesc& d, int graph, const std::string& name, int dtype, Shape shape,
             int kind) {
            if (kind < 0 || kind > 3) throw Error("invalid tensor kind");
            return d.add_tensor(graph, name, to_dtype(dtype), shape, (TensorKind)kind);
          },
          py::arg("graph"), py::arg("name"), py::arg("dtype"), py::arg("shape"),
          py::arg("kind"))
      .def("set_tensor_data",
           [](ProgramDesc& d, int t, const py::array& a) {
             auto info = checked_buffer(a, 0, false, "set_tensor_data");
             d.set_tensor_data(t, static_cast<const uint8_t*>(info.ptr),
                               (size_t)info.size * (size_t)info.itemsize);
           })
      .def(
          "add_op",
          [](ProgramDesc& d, int graph, const std::string& type, const std::string& name,
             std::vector<int> in, std::vector<int> out, const py::dict& attrs,
             std::vector<int> graphs, std::vector<std::pair<int, int>> aliases) {
            OpRecord r;
            r.type = type;
            r.name = name;
            r.graph = graph;
            r.in = std::move(in);
            r.out = std::move(out);
            for (auto kv : attrs) {
              auto k = kv.first.cast<std::string>();
              r.attrs.values[k] = to_attr(k, kv.second);
            }
            r.graphs = std::move(graphs);
            r.aliases = std::move(aliases);
            return d.add_op(std::move(r));
          },
          py::arg("graph"), py::arg("type"), py::arg("name"), py::arg("inputs"),
          py::arg("outputs"), py::arg("attrs"), py::arg("graphs"), py::arg("aliases"))
      .def(
          "add_stream",
          [](ProgramDesc& d, const std::string& name, int dtype, Shape shape, bool h2d) {
            return d.add_stream(name, to_dtype(dtype), shape, h2d);
          })
      .def("set_graph_io", &ProgramDesc::set_graph_io)
      .def_property_readonly("num_tensors", [](const ProgramDesc& d) { return d.tensors.size(); })
      .def_property_readonly("num_ops", [](const ProgramDesc& d) { return d.ops.size(); });

  py::class_<Engine>(m, "Engine")
      .def(py::init([](std::shared_ptr<ProgramDesc> d, int main_graph) {
             return std::make_unique<Engine>(std::const_pointer_cast<const ProgramDesc>(d),
                                             main_graph);
           }),
           py::arg("desc"), py::arg("main_graph"))
      .def(
          "run",
          [](Engine& e, const std::vector<py::object>& streams, int64_t num_host_transfers,
             const std::vector<int64_t>& item_bytes) {
            if (streams.size() != item_bytes.size())
              throw Error("Engine.run: streams and item_bytes differ in length");
            std::vector<StreamBinding> b(streams.size());
            std::vector<py::buffer_info> keep;
            for (size_t i = 0; i < streams.size(); ++i) {
              if (streams[i].is_none()) continue;
              auto arr = streams[i].cast<py::array>();
              size_t need = (size_t)num_host_transfers * (size_t)item_bytes[i];
              keep.push_back(checked_buffer(arr, need, true, "stream " + std::to_string(i)));
              b[i].data = static_cast<uint8_t*>(keep.back().ptr);
              b[i].items = num_host_transfers;
              b[i].item_bytes = (size_t)item_bytes[i];
            }
            py::gil_scoped_release release;
            e.run(std::move(b));
          },
          py::arg("streams"), py::arg("num_host_transfers"), py::arg("item_bytes"))
      .def("write_tensor",
           [](Engine& e, int t, const py::array& a) {
             auto info = checked_buffer(a, 0, false, "write_tensor");
             e.write_tensor(t, static_cast<const uint8_t*>(info.ptr),
                            (size_t)info.size * (size_t)info.itemsize);
           })
      .def("program_writes", &Engine::program_writes, py::arg("tensor"))
      .def(
          "bind_external",
          [](Engine& e, int t, py::array& a) {
            auto info = checked_buffer(a, 0, true, "bind_external");
            e.bind_external(t, static_cast<uint8_t*>(info.ptr),
                            (size_t)info.size * (size_t)info.itemsize);
          },
          py::arg("tensor"), py::arg("array"), py::keep_alive<1, 3>())
      .def("unbind_external", &Engine::unbind_external, py::arg("tensor"))
      .def(
          "tensor_address",
          [](const Engine& e, int t) { return reinterpret_cast<uintptr_t>(e.tensor(t).data); },
          py::arg("tensor"), "Address of a tensor's storage now (for tests and memory reports).")
      .def(
          "tensor_names", [](const Engine& e) {
            py::list out;
            for (int i = 0; i < e.num_tensors(); ++i) out.append(e.tensor(i).name);
            return out;
          })
      .def("read_tensor",
           [](const Engine& e, int t, py::array& a) {
             auto info = checked_buffer(a, 0, true, "read_tensor");
             e.read_tensor(t, static_cast<uint8_t*>(info.ptr),
                           (size_t)info.size * (size_t)info.itemsize);
           })
      .def("describe", &Engine::describe)
      .def("program_counts", &Engine::program_counts)
      .def("set_profiling", &Engine::set_profiling)
      .def("profile",
           [](const Engine& e) {
             py::list out;
             for (auto& p : e.profile()) out.append(py::make_tuple(p.label, p.seconds, p.calls));
             return out;
           })
      .def_property_readonly("arena_bytes", &Engine::arena_bytes)
      .def_property_readonly("unplanned_bytes", &Engine::unplanned_bytes)
      .def_property_readonly("runs", &Engine::runs);

  m.def("kernel_names", &KernelRegistry::names);
  m.def("gemm_kernel", []() { return std::string(gemm::kernel_name()); },
        "The core's own float32 GEMM micro-kernel: 'avx512', 'avx2' or 'portable'.");
  m.def("set_sgemm", [](uintptr_t fn) { blas::set_sgemm(reinterpret_cast<void*>(fn)); },
        "Install a cblas_sgemm-compatible function pointer (0 to remove).");
  m.def("num_threads", &num_threads, "Threads the core's kernels use.");
  m.def("set_num_threads", &set_num_threads, "Set the threads the core's kernels use.");
  m.def("has_blas", []() { return blas::sgemm_ptr() != nullptr; });
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

  // Instruction-set dispatch (core/isa.hpp) and the GEMM plans (core/blas.hpp).
  m.def("isa", []() { return std::string(isa::level_name(isa::level())); },
        "The instruction-set level the kernels use: IPUXL_ISA, else the best this CPU has.");
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
  m.def("prefer_fused_input_grad_update", &blas::prefer_fused_input_grad_update,
        py::arg("batch"), py::arg("rows"), py::arg("cols"),
        "Whether G @ W^T and W's folded update (G [batch, cols], W [rows, cols]) run faster "
        "as one MatMulInputGradUpdate pass than as two GEMMs at the level in use.");
  m.def("sgemm_plan", &blas::sgemm_plan_name, py::arg("ta"), py::arg("tb"), py::arg("M"),
        py::arg("N"), py::arg("K"), py::arg("packed") = false,
        "Which float32 GEMM runs this shape ('core' or 'blas'): measured once per shape, "
        "level and thread count, then cached.");
}
