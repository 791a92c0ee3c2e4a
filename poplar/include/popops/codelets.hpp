#pragma once
#include <poplar/Graph.hpp>
namespace popops {
/// Adds popops' vertex types to the graph (needed before any popops call).
void addCodelets(poplar::Graph &graph);
}
