#pragma once
#include <poplar/Graph.hpp>
namespace popnn {
/// Adds popnn's vertex types to the graph (needed before popnn calls).
void addCodelets(poplar::Graph &graph);
}
