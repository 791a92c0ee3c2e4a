// ipuxl's Poplar: StreamCallback, a host callback a stream is connected to.
#pragma once
#include <functional>
#include <memory>

namespace poplar {

class StreamCallback {
public:
  enum class Result { Success, NotAvailable };
  virtual ~StreamCallback() = default;
  virtual Result prefetch(void *p) = 0;
  virtual void fetch(void *p) = 0;
  virtual void complete() = 0;
  virtual void invalidatePrefetched() {}
};

class LegacyStreamCallback : public StreamCallback {
public:
  Result prefetch(void *) final { return Result::NotAvailable; }
  void complete() override {}
};

using StreamCallbackHandle = std::unique_ptr<StreamCallback>;

} // namespace poplar
