"""``import popart`` under ipuxl's compat aliases (:mod:`ipuxl.compat`).

PopXL programs import PopART's Python module for a few things around
PopXL: the library's version (``popart.versionString()``, logged by
Graphcore's applications), the type of ``Session.device``
(``popart.DeviceInfo``), and the types of the options PopXL exposes through
``ir._pb_ir.getSessionOptions()``. This module holds exactly those that have
a meaning in ipuxl:

* ``versionString()`` / ``versionNumber()``: ipuxl's version (there is no
  PopART here; the string says so: ``"0.1.0+ipuxl"``);
* ``DeviceInfo`` and ``DeviceType``: :mod:`ipuxl.device_info`;
* ``SessionOptions``: :class:`ipuxl.session_options.SessionOptions`, the
  type ``getSessionOptions()`` returns.

Any other attribute raises ``NotImplementedError`` naming it (PopART's
builder, sessions, ops and enums have no ipuxl counterpart), and PopART's
C++ bindings (``popart._internal.ir``, ``popart_core``) cannot be imported.
"""
from . import __version__
from .device_info import DeviceInfo, DeviceType
from .session_options import SessionOptions

__all__ = ["versionString", "versionNumber", "DeviceInfo", "DeviceType", "SessionOptions"]


def versionString() -> str:  # noqa: N802 - PopART's name
    """The version of the library behind PopXL: ipuxl's, marked as ipuxl."""
    return f"{__version__}+ipuxl"


def versionNumber() -> tuple:  # noqa: N802 - PopART's name
    """``(major, minor, point)`` of :func:`versionString`, as PopART returns."""
    major, minor, point = (int(p) for p in __version__.split(".")[:3])
    return major, minor, point


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(
        f"popart.{name} is not supported by ipuxl: its popart module holds only {__all__} "
        "(ipuxl has no PopART)")
