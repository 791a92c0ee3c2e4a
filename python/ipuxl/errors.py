"""Exception types, mirroring ``popxl.errors`` and ``popart.popart_exception``."""

__all__ = ["UndefinedValue", "popart_exception", "ipuxl_exception"]


class UndefinedValue(ValueError):
    """A property (such as ``Tensor.ipu``) has no defined value."""


class popart_exception(RuntimeError):  # noqa: N801 - PopART's name
    """Errors PopART raises from C++: invalid graphs, mismatched call sites,
    autodiff of modifying ops. Catching ``popart.popart_exception`` catches these."""


ipuxl_exception = popart_exception
