// ipuxl's Poplar: host streams (DataStream) and remote buffers.
#pragma once
#include <cstddef>
#include <memory>
#include <poplar/Type.hpp>
#include <string>

namespace poplar {

namespace ipuxl_detail {
struct StreamInfo {
  std::string handle;
  Type type;
  std::size_t numElements = 0;
  bool hostToDevice = true;
  bool broadcast = false; // ReplicatedStreamMode::BROADCAST: one stream for every replica
  unsigned id = 0;
};
struct RemoteBufferInfo {
  std::string handle;
  Type type;
  std::size_t numElements = 0, repeats = 1;
  unsigned id = 0;
};
} // namespace ipuxl_detail

enum class DataStreamType { HostToDeviceFIFO, DeviceToHostFIFO, HostToDeviceBuffer, DeviceToHostBuffer };
enum class ReplicatedStreamMode { REPLICATE, BROADCAST };

class DataStream {
public:
  DataStream() = default;
  explicit DataStream(std::shared_ptr<const ipuxl_detail::StreamInfo> i) : info_(std::move(i)) {}
  std::string handle() const { return info_ ? info_->handle : std::string(); }
  Type elementType() const { return info_->type; }
  std::size_t numElements() const { return info_->numElements; }
  DataStreamType type() const {
    return info_->hostToDevice ? DataStreamType::HostToDeviceFIFO : DataStreamType::DeviceToHostFIFO;
  }
  const ipuxl_detail::StreamInfo &ipuxlInfo() const { return *info_; }
  bool ipuxlValid() const { return static_cast<bool>(info_); }

private:
  std::shared_ptr<const ipuxl_detail::StreamInfo> info_;
};

class RemoteBuffer {
public:
  RemoteBuffer() = default;
  explicit RemoteBuffer(std::shared_ptr<const ipuxl_detail::RemoteBufferInfo> i) : info_(std::move(i)) {}
  std::string handle() const { return info_->handle; }
  Type elementType() const { return info_->type; }
  std::size_t numElements() const { return info_->numElements; }
  std::size_t getRepeats() const { return info_->repeats; }
  const ipuxl_detail::RemoteBufferInfo &ipuxlInfo() const { return *info_; }

private:
  std::shared_ptr<const ipuxl_detail::RemoteBufferInfo> info_;
};

} // namespace poplar
