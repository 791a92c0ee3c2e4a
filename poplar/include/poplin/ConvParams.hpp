// ipuxl's PopLibs: poplin::ConvParams, the parameters of a convolution as
// the Poplar API documents them (poplin/ConvParams.hpp). Per spatial
// dimension the input and the kernel are each truncated, dilated, padded
// and optionally flipped (in that order); they are convolved; the output is
// truncated, strided and padded.
#pragma once
#include <cstddef>
#include <ostream>
#include <poplar/Type.hpp>
#include <vector>

namespace poplin {

struct ConvParams {
  struct InputTransform {
    /// Elements removed from the start / end of each dimension, before dilation.
    std::vector<unsigned> truncationLower, truncationUpper;
    /// A dilation of d puts d - 1 zeros between neighbouring elements.
    std::vector<unsigned> dilation;
    /// Zeros added at the start / end of each dimension, after dilation.
    std::vector<unsigned> paddingLower, paddingUpper;
    /// Whether each dimension is reversed, after padding.
    std::vector<bool> flip;
    InputTransform() = default;
    /// The identity transform of `size` dimensions.
    explicit InputTransform(std::size_t size);
    InputTransform(std::vector<unsigned> truncationLower, std::vector<unsigned> truncationUpper,
                   std::vector<unsigned> dilation, std::vector<unsigned> paddingLower,
                   std::vector<unsigned> paddingUpper, std::vector<bool> flip);
    bool operator==(const InputTransform &o) const;
  };
  struct OutputTransform {
    std::vector<unsigned> truncationLower, truncationUpper;
    /// Keep every stride-th element (after truncation).
    std::vector<unsigned> stride;
    std::vector<unsigned> paddingLower, paddingUpper;
    OutputTransform() = default;
    explicit OutputTransform(std::size_t size);
    OutputTransform(std::vector<unsigned> truncationLower, std::vector<unsigned> truncationUpper,
                    std::vector<unsigned> stride, std::vector<unsigned> paddingLower,
                    std::vector<unsigned> paddingUpper);
    bool operator==(const OutputTransform &o) const;
  };

  poplar::Type inputType;
  poplar::Type outputType;
  std::size_t batchSize = 0;
  std::vector<std::size_t> inputFieldShape;
  std::vector<std::size_t> kernelShape;
  std::size_t inputChannelsPerConvGroup = 0;
  std::size_t outputChannelsPerConvGroup = 0;
  std::size_t numConvGroups = 1;
  InputTransform inputTransform;
  InputTransform kernelTransform;
  OutputTransform outputTransform;

  ConvParams() = default;
  ConvParams(poplar::Type dataType, std::size_t batchSize, std::vector<std::size_t> inputFieldShape,
             std::vector<std::size_t> kernelShape, std::size_t inputChannels, std::size_t outputChannels,
             std::size_t numConvGroups);
  ConvParams(poplar::Type inputType, poplar::Type outputType, std::size_t batchSize,
             std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
             std::size_t inputChannels, std::size_t outputChannels, std::size_t numConvGroups);
  ConvParams(poplar::Type inputType, poplar::Type outputType, std::size_t batchSize,
             std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
             std::size_t inputChannels, std::size_t outputChannels, std::size_t numConvGroups,
             InputTransform inputTransform, InputTransform kernelTransform, OutputTransform outputTransform);

  std::size_t getNumFieldDims() const { return inputFieldShape.size(); }
  std::size_t getBatchSize() const { return batchSize; }
  std::size_t getNumConvGroups() const { return numConvGroups; }
  std::size_t getNumInputChansPerConvGroup() const { return inputChannelsPerConvGroup; }
  std::size_t getNumOutputChansPerConvGroup() const { return outputChannelsPerConvGroup; }
  std::size_t getNumInputChans() const { return inputChannelsPerConvGroup * numConvGroups; }
  std::size_t getNumOutputChans() const { return outputChannelsPerConvGroup * numConvGroups; }
  poplar::Type getInputType() const { return inputType; }
  poplar::Type getOutputType() const { return outputType; }
  std::size_t getInputSize(unsigned dim) const { return inputFieldShape.at(dim); }
  std::size_t getKernelSize(unsigned dim) const { return kernelShape.at(dim); }
  /// The input / kernel size of `dim` after its transform.
  std::size_t getTransformedInputSize(unsigned dim) const;
  std::size_t getTransformedKernelSize(unsigned dim) const;
  /// The size of the convolution's output before the output transform.
  std::size_t getUntransformedOutputSize(unsigned dim) const;
  std::size_t getOutputSize(unsigned dim) const;
  std::vector<std::size_t> getOutputFieldShape() const;
  /// Throws poputil::poplibs_error naming what is inconsistent.
  void validate() const;

  bool operator==(const ConvParams &o) const;
  bool operator!=(const ConvParams &o) const { return !(*this == o); }
};

std::ostream &operator<<(std::ostream &os, const ConvParams &p);

} // namespace poplin
