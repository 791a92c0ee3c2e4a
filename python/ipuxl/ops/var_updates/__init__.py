"""Variable-update ops, mirroring ``popxl.ops.var_updates`` (being written)."""
__all__ = []
