"""Tensor locations, mirroring ``popxl.tensorlocation``."""
from enum import Enum

__all__ = ["TensorStorage", "ReplicatedTensorSharding", "TileSet", "ExecutionContext",
           "TensorLocation"]


class TensorStorage(Enum):
    OnChip = 0
    OffChip = 1


class ReplicatedTensorSharding(Enum):
    Off = 0
    On = 1


class TileSet(Enum):
    Compute = 0
    IO = 1
    Undefined = 2


class ExecutionContext(Enum):
    Normal = 0
    AccumulateOuterFragment = 1
    WeightsFromHostFragment = 2
    WeightsToHostFragment = 3
    OptimizerFromHostFragment = 4
    Subgraph = 5


class TensorLocation:
    def __init__(self, storage: TensorStorage = TensorStorage.OnChip,
                 replicated_tensor_sharding: ReplicatedTensorSharding = ReplicatedTensorSharding.Off):
        self.storage = storage
        self.replicated_tensor_sharding = replicated_tensor_sharding

    def __repr__(self):
        return f"TensorLocation({self.storage}, {self.replicated_tensor_sharding})"
