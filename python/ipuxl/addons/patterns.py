"""``popxl_addons.patterns``: PopART's pre-alias patterns, applied on request.

popxl_addons programs call :func:`apply_pre_alias_patterns` after autodiff
so that PopART rewrites ops that only exist to carry a gradient rule
(``OpToIdentityPattern`` turns the identical-inputs all-reduce into an
identity, and so on) before lowering. ipuxl's ops need no rewriting: each
op already lowers to what the pattern would have produced (the
identical-inputs all-reduce runs the Identity kernel, see
:mod:`ipuxl.addons.ops.replicated_strided_collectives`), so applying the
patterns changes nothing in the graphs. The level is still checked, so
that a misspelt level fails here as it does in popxl_addons.
"""
from ..ir import Ir

__all__ = ["apply_pre_alias_patterns", "patterns_level"]

#: The PopART pattern levels popxl_addons accepts.
patterns_level = ("no_patterns", "minimal", "default", "all")


def apply_pre_alias_patterns(ir: Ir, level: str = "default") -> None:
    """Apply the pre-alias patterns of ``level`` to every graph of ``ir``
    (a no-op in ipuxl, whose ops need no pre-alias rewrite; see the module
    docstring). ``KeyError`` for an unknown level, as popxl_addons."""
    if level not in patterns_level:
        raise KeyError(f"apply_pre_alias_patterns: unknown patterns level {level!r}; expected one "
                       f"of {', '.join(patterns_level)}")
    if not isinstance(ir, Ir):
        raise TypeError(f"apply_pre_alias_patterns: expected a popxl.Ir, got {type(ir).__name__}")
