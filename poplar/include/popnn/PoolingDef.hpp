// ipuxl's PopLibs: popnn pooling kinds (popnn/PoolingDef.hpp).
#pragma once
namespace popnn {
enum class PoolingType { MAX, AVG, SUM };
const char *asString(const PoolingType &method);
} // namespace popnn
