"""Collective ops, mirroring ``popxl.ops.collectives``. Replication is not
implemented yet: each op raises NotImplementedError naming itself."""

__all__ = [
    "replicated_all_reduce", "replicated_all_reduce_", "replicated_all_gather",
    "replicated_reduce_scatter", "replica_sharded_slice", "replicated_slice", "all_reduce",
    "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs",
]


def _not_implemented(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"popxl.ops.collectives.{name} is not implemented yet in ipuxl")
    fn.__name__ = name
    fn.__doc__ = f"``{name}``: not implemented yet (raises NotImplementedError)."
    return fn


for _n in __all__:
    globals()[_n] = _not_implemented(_n)
