// ipuxl's PopLibs: older SDKs declare the collective operator here as
// popops::CollectiveOperator; it is gcl's (gcl/Collectives.hpp, -lgcl).
#pragma once
#include <gcl/Collectives.hpp>
