// ipuxl's Poplar: Target, the description of the machine a graph is built for.
#pragma once
#include <cstddef>
#include <poplar/OptionFlags.hpp>
#include <poplar/TargetType.hpp>
#include <poplar/Type.hpp>
#include <string>

namespace poplar {

class Target {
public:
  Target() = default;
  static Target createIPUTarget(unsigned numIPUs, StringRef systemType, const OptionFlags & = {});
  static Target createIPUTarget(unsigned numIPUs, unsigned tilesPerIPU, StringRef systemType,
                                const OptionFlags & = {});
  static Target createCPUTarget(bool accurateHalf = false, unsigned numIPUs = 1);

  TargetType getTargetType() const { return type_; }
  std::string getTargetSystemString() const { return arch_ == "ipu1" ? "C2" : "IPU-POD16"; }
  std::string getTargetArchString() const { return arch_; }
  unsigned getIpuVersion() const { return arch_ == "ipu1" ? 1 : (arch_ == "ipu21" ? 21 : 2); }
  unsigned getNumIPUs() const { return numIPUs_; }
  unsigned getTilesPerIPU() const { return tilesPerIPU_; }
  unsigned getNumTiles() const { return numIPUs_ * tilesPerIPU_; }
  unsigned getNumWorkerContexts() const { return 6; }
  unsigned getBytesPerTile() const { return bytesPerTile_; }
  std::size_t getMemoryBytes() const { return std::size_t(bytesPerTile_) * getNumTiles(); }
  unsigned getExchangeBytesPerCycle() const { return 4; }
  unsigned getDataPathWidth() const { return 64; }
  unsigned getVectorWidth(const Type &t) const { return 8 / static_cast<unsigned>(t.ipuxlSize() ? t.ipuxlSize() : 1); }
  unsigned getFloatVectorWidth() const { return 2; }
  unsigned getHalfVectorWidth() const { return 4; }
  unsigned getTypeSize(const Type &t) const { return static_cast<unsigned>(t.ipuxlSize()); }
  unsigned getAtomicStoreGranularity() const { return 4; }
  double getTileClockFrequency() const { return clockHz_; }
  unsigned getNumStrideBits() const { return 12; }
  std::size_t getBytesPerIPU() const { return std::size_t(bytesPerTile_) * tilesPerIPU_; }
  unsigned getNumWorkerContextsPerTile() const { return 6; }
  Target createVirtualTarget(unsigned numIPUs, unsigned tilesPerIPU) const;

  // ipuxl: construction by the IPUModel and accessors of the model's figures.
  Target(TargetType type, std::string arch, unsigned numIPUs, unsigned tilesPerIPU,
         unsigned bytesPerTile, double clockHz)
      : type_(type), arch_(arch), numIPUs_(numIPUs), tilesPerIPU_(tilesPerIPU),
        bytesPerTile_(bytesPerTile), clockHz_(clockHz) {}
  unsigned ipuxlMinSyncDelay() const { return minSyncDelay_; }
  void ipuxlSetMinSyncDelay(unsigned d) { minSyncDelay_ = d; }

private:
  TargetType type_ = TargetType::IPU_MODEL;
  std::string arch_ = "ipu2";
  unsigned numIPUs_ = 1, tilesPerIPU_ = 1472, bytesPerTile_ = 638976;
  double clockHz_ = 1.33e9;
  unsigned minSyncDelay_ = 0;
};

} // namespace poplar
