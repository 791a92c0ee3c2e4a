"""``Module``, mirroring ``popxl.Module``: a callable whose ``build`` method
is traced by ``ir.create_graph``; attributes set in ``build`` (for example
``self.W = graph_input(...)``) can later key ``inputs_dict``."""

__all__ = ["Module"]


class Module:
    def build(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must override Module.build")

    def __call__(self, *args, **kwargs):
        return self.build(*args, **kwargs)
