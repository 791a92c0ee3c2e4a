// ipuxl's Poplar: DeviceManager. There is no IPU hardware driver here (it
// ships only with Graphcore's Poplar SDK), so getDevices(TargetType::IPU, n)
// returns no device and says why on stderr, once; IPU_MODEL devices are made.
#pragma once
#include <poplar/Device.hpp>
#include <vector>

namespace poplar {

class DeviceManager {
public:
  DeviceManager() = default;
  static DeviceManager createDeviceManager() { return DeviceManager(); }
  std::vector<Device> getDevices(TargetType type, unsigned requiredNumIPUs,
                                 const OptionFlags &opts = {}) const;
  std::vector<Device> getDevices(const OptionFlags &opts = {}) const;
  /// Throws poplar::poplar_error: no IPU device exists without the SDK.
  Device getDevice(unsigned deviceManagerId, const OptionFlags &opts = {}) const;
  std::size_t getNumDevices() const { return 0; }
  std::vector<unsigned> getChildDeviceIds(unsigned, unsigned = 1) const { return {}; }
};

} // namespace poplar
