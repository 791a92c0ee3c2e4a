// ipuxl's Poplar: Device. An IPUModel device is always attachable; ipuxl has
// no IPU hardware driver (that needs Graphcore's SDK), so no hardware Device exists.
#pragma once
#include <memory>
#include <poplar/Target.hpp>
#include <vector>

namespace poplar {

class Device {
public:
  Device() = default;
  Device(Device &&) = default;
  Device &operator=(Device &&) = default;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  ~Device() = default;

  const Target &getTarget() const;
  unsigned getId() const { return id_; }
  bool attach() { attached_ = true; return true; }
  void detach() { attached_ = false; }
  bool isAttached() const { return attached_; }
  std::vector<unsigned> getDriverIDs() const { return {id_}; }
  Device createVirtualDevice(unsigned tilesPerIPU);
  bool supportsRemoteBuffers() const { return true; }

  // ipuxl
  explicit Device(const Target &t, unsigned id = 0)
      : target_(std::make_shared<Target>(t)), id_(id), attached_(true) {}

private:
  std::shared_ptr<Target> target_;
  unsigned id_ = 0;
  bool attached_ = false;
};

} // namespace poplar
