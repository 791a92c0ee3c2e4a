// ipuxl's Poplar: where a FunctionBuffer keeps a Function's code
// (Graph::addFunctionBuffer). REMOTE: in remote (streaming) memory, loaded
// into the executable's code memory by Copy(FunctionBuffer, Function), as
// PopART's RemoteCodeLoadOpx uses it for CodeMemoryType::ExecutableMemory.
#pragma once

namespace poplar {
enum class FunctionBufferMappingType { REMOTE };
} // namespace poplar
