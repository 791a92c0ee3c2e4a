#pragma once
#include <poplar/Graph.hpp>
namespace poprand {
/// Adds poprand's vertex types to the graph (needed before poprand calls).
void addCodelets(poplar::Graph &graph);
}
