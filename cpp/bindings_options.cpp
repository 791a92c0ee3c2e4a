// Python bindings of the core's options (core/options.hpp): the one way the
// package's settings (python/ipuxl/settings.py) reach the core.
#include <pybind11/pybind11.h>

#include "core/blas.hpp"
#include "core/options.hpp"

namespace py = pybind11;

namespace ipuxl {

void bind_options(py::module_& m) {
  py::enum_<blas::SgemmImpl>(m, "GemmChoice", "Which float32 GEMM runs a product.")
      .value("auto", blas::SgemmImpl::Auto, "the fixed per-shape rule (blas.cpp)")
      .value("core", blas::SgemmImpl::Core, "always the core's packed GEMM")
      .value("blas", blas::SgemmImpl::Blas, "always the installed BLAS (the core's without one)");
  py::enum_<ProfileClock>(m, "ProfileClock", "The engine profiler's clock.")
      .value("wall", ProfileClock::Wall)
      .value("thread", ProfileClock::Thread);
  py::enum_<blas::FusedUpdate>(m, "FusedUpdate",
                               "Whether the input gradient and a folded update fuse.")
      .value("auto", blas::FusedUpdate::Auto, "the core's per-level rule")
      .value("always", blas::FusedUpdate::Always)
      .value("never", blas::FusedUpdate::Never);

  py::class_<CoreOptions>(m, "CoreOptions",
                          "The core's options (core/options.hpp); ipuxl.settings builds them.")
      .def(py::init([](int num_threads, const std::string& isa, blas::SgemmImpl gemm,
                       bool blas_allowed, ProfileClock profile_clock) {
             CoreOptions o;
             o.num_threads = num_threads;
             o.isa = isa;
             o.gemm = gemm;
             o.blas_allowed = blas_allowed;
             o.profile_clock = profile_clock;
             return o;
           }),
           py::kw_only(), py::arg("num_threads") = 0, py::arg("isa") = "best",
           py::arg("gemm") = blas::SgemmImpl::Auto, py::arg("blas_allowed") = true,
           py::arg("profile_clock") = ProfileClock::Wall)
      .def_readonly("num_threads", &CoreOptions::num_threads)
      .def_readonly("isa", &CoreOptions::isa)
      .def_readonly("gemm", &CoreOptions::gemm)
      .def_readonly("blas_allowed", &CoreOptions::blas_allowed)
      .def_readonly("profile_clock", &CoreOptions::profile_clock)
      .def("__repr__", [](const CoreOptions& o) {
        return "CoreOptions(num_threads=" + std::to_string(o.num_threads) + ", isa='" + o.isa +
               "', gemm=" + std::to_string((int)o.gemm) + ", blas_allowed=" +
               (o.blas_allowed ? "True" : "False") + ", profile_clock=" +
               std::to_string((int)o.profile_clock) + ")";
      });
  m.attr("max_threads") = kMaxThreads;
  m.def("configure", &configure, py::arg("options"),
        "Apply the core's options (called once, at import, by ipuxl._core_loader).");
  m.def("options", &options, py::return_value_policy::copy, "The core's options in effect.");
  m.def("prefer_fused_input_grad_update", &blas::prefer_fused_input_grad_update,
        py::arg("batch"), py::arg("rows"), py::arg("cols"),
        py::arg("mode") = blas::FusedUpdate::Auto,
        "Whether G @ W^T and W's folded update (G [batch, cols], W [rows, cols]) run faster "
        "as one MatMulInputGradUpdate pass than as two GEMMs at the level in use ('always' "
        "and 'never' force the answer within the kernel's batch range, 1 to 16).");
}

}  // namespace ipuxl
