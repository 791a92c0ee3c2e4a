// ipuxl's Poplar: IPUModel, the simulated IPU. Its public fields are those
// of the SDK; tilesPerIPU and numIPUs shape the target, the rest are kept
// for source compatibility (ipuxl's cycle model is its own, see docs/poplar.md).
#pragma once
#include <poplar/Device.hpp>
#include <poplar/OptionFlags.hpp>
#include <string>

namespace poplar {

class IPUModel {
public:
  enum class RelativeSyncDelayType { NO_DELAY, AUTO };
  explicit IPUModel(const char *ipuVersion = "ipu2");

  std::string ipuVersion;
  unsigned numIPUs = 1;
  unsigned tilesPerIPU = 1472;
  unsigned memoryPerTile = 638976;
  unsigned minIPUSyncDelay = 0;
  RelativeSyncDelayType relativeSyncDelay = RelativeSyncDelayType::AUTO;
  bool compileIPUCode = false;
  unsigned numWorkerContexts = 6;
  double tileClockFrequency = 1.33e9;
  unsigned globalSyncCycles = 150;

  Device createDevice(OptionFlags opts = {}, bool accurateHalf = false,
                      unsigned deviceManagerId = 0) const;
};

} // namespace poplar
