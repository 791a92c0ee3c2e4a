// ipuxl._mpi_exchange: the byte exchange between instances
// (Ir(replication="popdist")) in C, over the communicator that
// ipuxl.popdist made with mpi4py.
//
// Optional: CMake builds it only when it finds an MPI library and mpi4py's
// headers. The core never links MPI; it gets this module's exchange as a
// plain C function pointer and a context (Engine.set_distributed_native),
// and calls it from Engine.run without the GIL, so a collective that
// crosses instances costs MPI's own latency instead of a call back into
// Python. Without this module ipuxl.popdist exchanges through mpi4py.
//
// The exchange is the one the mpi4py path does, message for message (same
// communicator, tag, order of posting), so the two paths give the same
// bytes; the arithmetic stays in the core.
#include <Python.h>
#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <pybind11/pybind11.h>

#include "../cpp/exec/exchange_abi.h"

#include <time.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// The tag of ipuxl.popdist.Communicator._TAG: both paths use one stream of
// messages on the communicator.
constexpr int kTag = 7001;
// Messages larger than this go as several (MPI counts are int); MPI keeps
// messages between one pair on one tag in order, so chunks match up.
constexpr size_t kChunk = size_t(1) << 30;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct Exchange {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  double timeout = 300.0;
  std::string timeout_env;  // named in the timeout message
  std::vector<MPI_Request> reqs;
  uint64_t calls = 0;
  // One exchange at a time per context: engines running collectives from
  // two threads at once would otherwise share `reqs`. (Their messages
  // would still pair up only if every instance ran them in the same order;
  // programs run collectives between instances from one thread.)
  std::mutex mu;
};

void set_error(char* err, size_t len, const std::string& msg) {
  if (!err || !len) return;
  std::snprintf(err, len, "%s", msg.c_str());
}

std::string mpi_error(int code) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(s, (size_t)n);
}

// Completes x->reqs, polling MPI (Testall drives MPI's progress engine as
// Waitall does) and the clock. Past the timeout it prints the error that
// ipuxl.popdist's watchdog prints and aborts the MPI job: requests still
// pending write into the caller's buffers, so the wait cannot simply be
// abandoned with an exception.
int wait_all(Exchange* x, const char* what, char* err, size_t err_len) {
  const int n = (int)x->reqs.size();
  const double deadline = now_s() + x->timeout;
  for (unsigned spin = 0;; ++spin) {
    int done = 0;
    const int rc = MPI_Testall(n, x->reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      set_error(err, err_len, std::string("popdist: ") + what + " between instances: " +
                                  mpi_error(rc));
      return 1;
    }
    if (done) return 0;
    if ((spin & 255) == 255 && now_s() > deadline) {
      std::fprintf(stderr,
                   "ipuxl.popdist.InstanceError: popdist: %s between instances timed out after "
                   "%g s (instance %d of %d waiting): another instance died, hangs, or did not "
                   "reach the same collective. Set %s to wait longer. Aborting the MPI job.\n",
                   what, x->timeout, x->rank, x->size, x->timeout_env.c_str());
      std::fflush(stderr);
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 1);
      set_error(err, err_len, std::string("popdist: ") + what + " between instances timed out");
      return 2;
    }
  }
}

}  // namespace

namespace {

// Posts every receive, then every send (chunked to MPI's int counts: both
// sides chunk a message alike, and MPI keeps one pair's messages on one
// tag in order), and waits for them all. On a failure to post, requests
// already posted cannot be withdrawn safely: the job is stopped, as the
// timeout does, after saying why.
int post_and_wait(Exchange* x, const ipuxl_block* sends, size_t n_sends, const ipuxl_block* recvs,
                  size_t n_recvs, const char* what, char* err, size_t err_len) {
  x->reqs.clear();
  int rc = MPI_SUCCESS;
  // Checked before anything is posted: a bad block is the caller's error,
  // and nothing is in flight yet.
  for (size_t i = 0; i < n_sends + n_recvs; ++i) {
    const ipuxl_block& b = i < n_sends ? sends[i] : recvs[i - n_sends];
    if (b.peer < 0 || b.peer >= x->size || b.peer == x->rank || (!b.data && b.bytes)) {
      set_error(err, err_len, std::string("popdist: ") + what + ": a message to or from instance " +
                                  std::to_string(b.peer) + " (this is instance " +
                                  std::to_string(x->rank) + " of " + std::to_string(x->size) +
                                  ", and messages need a buffer)");
      return 1;
    }
  }
  auto post = [&](const ipuxl_block& b, bool send) {
    auto* p = static_cast<uint8_t*>(b.data);
    size_t at = 0;
    do {  // a 0-byte message is posted too: it still pairs the instances
      const size_t cnt = std::min(kChunk, b.bytes - at);
      x->reqs.emplace_back();
      rc = send ? MPI_Isend(p + at, (int)cnt, MPI_BYTE, b.peer, kTag, x->comm, &x->reqs.back())
                : MPI_Irecv(p + at, (int)cnt, MPI_BYTE, b.peer, kTag, x->comm, &x->reqs.back());
      at += cnt;
    } while (rc == MPI_SUCCESS && at < b.bytes);
  };
  for (size_t i = 0; i < n_recvs && rc == MPI_SUCCESS; ++i) post(recvs[i], false);
  for (size_t i = 0; i < n_sends && rc == MPI_SUCCESS; ++i) post(sends[i], true);
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr,
                 "ipuxl.popdist.InstanceError: popdist: %s between instances: posting a message "
                 "failed (%s). Aborting the MPI job.\n",
                 what, mpi_error(rc).c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    set_error(err, err_len, std::string("popdist: ") + what + ": " + mpi_error(rc));
    return 1;
  }
  return wait_all(x, what, err, err_len);
}

}  // namespace

// The C entry point the core calls (its type: ipuxl_exchange_blocks_fn in
// cpp/exec/exchange_abi.h): the messages a collective lists, without the
// GIL. Returns 0, or non-zero with a message in err.
extern "C" int ipuxl_mpi_exchange_blocks(void* ctx, const ipuxl_block* sends, size_t n_sends,
                                         const ipuxl_block* recvs, size_t n_recvs,
                                         const char* what, char* err, size_t err_len) {
  auto* x = static_cast<Exchange*>(ctx);
  std::lock_guard<std::mutex> lock(x->mu);
  ++x->calls;
  if (x->size == 1) return 0;
  return post_and_wait(x, sends, n_sends, recvs, n_recvs, what, err, err_len);
}

// An all-gather of bytes in instance order: recv (size x bytes) gets every
// other instance's `bytes` in its block; this instance's block is not
// written. 0 bytes: a barrier. Returns 0, or non-zero with a message in err.
extern "C" int ipuxl_mpi_exchange(void* ctx, const uint8_t* send, size_t bytes, uint8_t* recv,
                                  const char* what, char* err, size_t err_len) {
  auto* x = static_cast<Exchange*>(ctx);
  std::lock_guard<std::mutex> lock(x->mu);
  ++x->calls;
  if (x->size == 1) return 0;
  if (bytes == 0) {
    x->reqs.clear();
    x->reqs.emplace_back();
    const int rc = MPI_Ibarrier(x->comm, &x->reqs.back());
    if (rc != MPI_SUCCESS) {
      set_error(err, err_len, std::string("popdist: ") + what + ": " + mpi_error(rc));
      return 1;
    }
    return wait_all(x, what, err, err_len);
  }
  std::vector<ipuxl_block> sends, recvs;
  for (int p = 0; p < x->size; ++p) {
    if (p == x->rank) continue;
    recvs.push_back({p, recv + (size_t)p * bytes, bytes});
    sends.push_back({p, const_cast<uint8_t*>(send), bytes});
  }
  return post_and_wait(x, sends.data(), sends.size(), recvs.data(), recvs.size(), what, err,
                       err_len);
}

namespace {

// The Python face: made by ipuxl.popdist.Communicator from its mpi4py
// communicator; keeps that communicator alive as long as it lives.
class PyExchange {
 public:
  PyExchange(py::object comm, double timeout, std::string timeout_env)
      : comm_obj_(std::move(comm)) {
    MPI_Comm* c = PyMPIComm_Get(comm_obj_.ptr());
    if (!c) throw py::error_already_set();
    if (*c == MPI_COMM_NULL) throw py::value_error("_mpi_exchange: the communicator is MPI.COMM_NULL");
    if (!(timeout > 0)) throw py::value_error("_mpi_exchange: the timeout must be positive");
    x_.comm = *c;
    x_.timeout = timeout;
    x_.timeout_env = std::move(timeout_env);
    int rc = MPI_Comm_rank(x_.comm, &x_.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(x_.comm, &x_.size);
    if (rc != MPI_SUCCESS) throw std::runtime_error("_mpi_exchange: " + mpi_error(rc));
  }

  // The core's entry point (ipuxl_exchange_blocks_fn).
  uintptr_t function() const { return reinterpret_cast<uintptr_t>(&ipuxl_mpi_exchange_blocks); }
  uintptr_t context() { return reinterpret_cast<uintptr_t>(&x_); }

  // For ipuxl.popdist.Communicator.exchange (host-side gathers) and tests:
  // the same C function, with the GIL released while MPI waits.
  void exchange(py::buffer send, py::buffer recv, const std::string& what) {
    py::buffer_info s = send.request(), r = recv.request(true);
    const size_t n = (size_t)s.size * (size_t)s.itemsize;
    const size_t m = (size_t)r.size * (size_t)r.itemsize;
    if (!is_contiguous(s) || !is_contiguous(r))
      throw py::value_error("popdist: " + what + ": the exchange needs contiguous buffers");
    if (m != n * (size_t)x_.size)
      throw py::value_error("popdist: " + what + ": " + std::to_string(m) +
                            " receive bytes for " + std::to_string(x_.size) + " instances of " +
                            std::to_string(n) + " bytes");
    char err[512] = {0};
    int rc;
    {
      py::gil_scoped_release nogil;
      rc = ipuxl_mpi_exchange(&x_, static_cast<const uint8_t*>(s.ptr), n,
                              static_cast<uint8_t*>(r.ptr), what.c_str(), err, sizeof err);
    }
    if (rc != 0) throw std::runtime_error(err);
  }

  int rank() const { return x_.rank; }
  int size() const { return x_.size; }
  double timeout() const { return x_.timeout; }
  uint64_t calls() {
    std::lock_guard<std::mutex> lock(x_.mu);
    return x_.calls;
  }

 private:
  static bool is_contiguous(const py::buffer_info& b) {
    py::ssize_t expect = b.itemsize;
    for (int d = (int)b.ndim - 1; d >= 0; --d) {
      if (b.shape[(size_t)d] != 1 && b.strides[(size_t)d] != expect) return false;
      expect *= b.shape[(size_t)d];
    }
    return true;
  }

  py::object comm_obj_;
  Exchange x_;
};

std::string library_version() {
  char s[MPI_MAX_LIBRARY_VERSION_STRING];
  int n = 0;
  if (MPI_Get_library_version(s, &n) != MPI_SUCCESS) return "";
  return std::string(s, (size_t)n);
}

}  // namespace

PYBIND11_MODULE(_mpi_exchange, m) {
  m.doc() = "ipuxl's byte exchange between instances in C (optional; needs MPI and mpi4py)";
  if (import_mpi4py() < 0) throw py::error_already_set();
  m.def("library_version", &library_version,
        "MPI_Get_library_version of the MPI library this module is linked to (ipuxl.popdist "
        "checks that it is the one mpi4py loaded).");
  m.def(
      "thread_level",
      []() {
        int level = MPI_THREAD_SINGLE;
        MPI_Query_thread(&level);
        return level;
      },
      "MPI_Query_thread (MPI must be initialised).");
  m.attr("THREAD_SERIALIZED") = (int)MPI_THREAD_SERIALIZED;
  py::class_<PyExchange>(m, "Exchange")
      .def(py::init<py::object, double, std::string>(), py::arg("comm"), py::arg("timeout"),
           py::arg("timeout_env") = "IPUXL_POPDIST_TIMEOUT",
           "The exchange over `comm` (an mpi4py communicator, kept alive); every wait is bounded "
           "by `timeout` seconds, past which the job is aborted.")
      .def_property_readonly("function", &PyExchange::function,
                             "Address of the C function ipuxl_mpi_exchange_blocks (cpp/exec/exchange_abi.h).")
      .def_property_readonly("context", &PyExchange::context,
                             "Address of its context (valid while this object lives).")
      .def("exchange", &PyExchange::exchange, py::arg("send"), py::arg("recv"), py::arg("what"))
      .def_property_readonly("rank", &PyExchange::rank)
      .def_property_readonly("size", &PyExchange::size)
      .def_property_readonly("timeout", &PyExchange::timeout)
      .def_property_readonly("calls", &PyExchange::calls);
}
