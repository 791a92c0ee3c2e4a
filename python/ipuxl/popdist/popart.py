"""``popdist.popart``, mirroring PopDist's PopART helpers: session options
and the device of this instance (see :mod:`ipuxl.popdist`)."""
from . import getNumInstances, layout

__all__ = ["configureSessionOptions", "getDevice"]


def configureSessionOptions(opts) -> None:
    """Sets PopART's distributed-replication options on ``opts`` (any object
    with attributes), as PopDist does: ``replicatedGraphCount`` (local
    replicas), ``globalReplicationFactor``, ``globalReplicaOffset``, and
    ``enableDistributedReplicatedGraphs`` when there are several instances."""
    lay = layout()
    opts.enableReplicatedGraphs = lay.local > 1 or lay.instances > 1
    opts.replicatedGraphCount = lay.local
    opts.enableDistributedReplicatedGraphs = getNumInstances() > 1
    opts.globalReplicationFactor = lay.total
    opts.globalReplicaOffset = lay.offset


def getDevice(ipus_per_replica: int = 1):
    """The device description ``popxl.Session`` takes for this instance:
    ipuxl simulates IPUs, so it is ``"ipu_hw"`` (which runs on the
    simulator)."""
    layout()
    return "ipu_hw"
