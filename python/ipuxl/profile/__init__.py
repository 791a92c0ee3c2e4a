"""IPU model profiles: memory per tile by PopVision category, program size
of Functions, liveness over program steps and cycles, from ipuxl's
analytical IPU model (``cpp/model``, described in docs/ipu_model.md).

* :func:`profile_ir` profiles an ``Ir`` without running it;
  ``session.profile()`` gives the profile of a Session's program.
* :class:`Profile` holds the report (``summary()``, ``save()``, ``html()``).
* :func:`compare` / :func:`write_html` put several side by side.
* ``POPLAR_ENGINE_OPTIONS='{"autoReport.all":"true","autoReport.directory":"DIR"}'``
  makes every Session write ``DIR/profile.json`` (and the viewer's
  ``profile.html``), as Poplar writes ``profile.pop``.

The JSON's schema, which the viewer's page takes from any producer, is
docs/profile.md.
"""
import contextlib
import os
import sys
import threading
from typing import Iterator, List, Optional, Union

from .model import MODEL_ENV, IpuModel, OutOfMemoryError
from .report import Profile, load, profile_program

__all__ = ["IpuModel", "OutOfMemoryError", "Profile", "profile_ir", "load", "compare",
           "write_html", "MODEL_ENV", "autoreport_directory", "capture"]


def profile_ir(ir, model: Union[IpuModel, str, None] = None, name: str = "") -> Profile:
    """The profile of ``ir``'s program as PopXL would compile it (the
    faithful lowering: every op, one Function per called graph), without
    building an Engine or running anything.

    ``model``: an :class:`IpuModel`, a version name (``"ipu2"``), or
    ``"cpu"`` (one tile, no memory limit); by default ``IpuModel.from_env()``.
    """
    from ..lowering import lower
    from ..lowering.program import to_desc

    cpu = model == "cpu"
    if model is None or cpu:
        model = IpuModel.from_env()
    elif isinstance(model, str):
        model = IpuModel(version=model)
    prog = lower(ir)
    desc = to_desc(prog, with_data=False, with_index=False)[0]
    return profile_program(prog, desc, model, cpu=cpu, name=name)


def compare(a: Profile, b: Profile) -> str:
    """Two profiles side by side: memory by category, code, cycles, and
    the graphs' code (the outlined-vs-inlined question)."""
    from .compare import compare_text

    return compare_text(a, b)


def write_html(profiles, path: str, title: Optional[str] = None, labels=None,
               links=None) -> str:
    """The viewer: one self-contained HTML page for a profile, or the
    comparison of several (labelled by ``labels`` or their names; ``links``
    to other pages, ``{"label", "href"}``)."""
    from .html import write_html as _w

    return _w(list(profiles), path, title=title, labels=labels, links=links)


# ---- Session integration ------------------------------------------------

# Active capture() blocks: (the list profiles go to, the IpuModel a "cpu"
# session is profiled on). Process-wide, as ``ipuxl profile`` runs a script
# whose Sessions may be created by any thread.
_captures: list = []
_captures_lock = threading.Lock()


@contextlib.contextmanager
def capture(model: Optional[IpuModel] = None) -> Iterator[List["CapturedSession"]]:
    """Collects the profile of every Session created inside the ``with``
    block, in creation order (``ipuxl profile`` runs a script inside one).
    A ``"cpu"`` session is profiled on ``model`` (default: the settings'
    IpuModel), as the command models an IPU whatever device a script picks.
    Yields the list the :class:`CapturedSession` records are appended to."""
    entry = ([], model)
    with _captures_lock:
        _captures.append(entry)
    try:
        yield entry[0]
    finally:
        with _captures_lock:
            _captures.remove(entry)


class CapturedSession:
    """A Session created while ``ipuxl profile`` runs a script: its
    profile (on the IPU model, whatever device the script chose), its
    device, its Ir (``ipuxl export`` exports it), and its engine, whose run
    count is read when the script ends (at creation it has run 0 times)."""

    def __init__(self, profile: Profile, session, device: str):
        self.profile = profile
        self.device = device
        self.session = session
        self.ir = session._ir
        self._engine = session._engine

    def finish(self) -> Profile:
        """The profile, with the times the script ran the Session's main
        program (``Profile.runs``)."""
        # An abstract Session (ipuxl._abstract) has no Engine and never runs.
        self.profile.runs = int(self._engine.runs) if self._engine is not None else 0
        return self.profile


def autoreport_directory() -> Optional[str]:
    """The directory ``POPLAR_ENGINE_OPTIONS`` asks reports to be written
    to (``autoReport.all`` or ``autoReport.outputGraphProfile`` true), or
    None. The options are checked by :mod:`ipuxl.settings`: an unknown one
    (``autoReport.directroy``) is a ValueError naming the closest, as
    Poplar refuses it, never a report in the wrong place."""
    from .. import settings  # noqa: PLC0415

    return settings.current().autoreport_directory


def write_report(profile: Profile, directory: str) -> str:
    """Writes ``profile.json`` and the viewer's ``profile.html`` into
    ``directory``; returns the json path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "profile.json")
    profile.save(path)
    profile.html(os.path.join(directory, "profile.html"))
    return path


def session_model(session, device: str, model: Optional[IpuModel]) -> Optional[Profile]:
    """At Session creation: the model of its program for ``"ipu_model"`` and
    ``"ipu_hw"`` (out of memory raises, unless the ipu_model's
    ``allow_out_of_memory``), plus the autoReport and ``ipuxl profile``
    hooks. ``"cpu"`` has no tile memory limit: nothing is computed unless a
    report is asked for."""
    report_dir = autoreport_directory()
    with _captures_lock:
        captures = list(_captures)
    if device == "cpu" and not report_dir and not captures:
        return None
    prog = session._prog
    if model is None:
        model = IpuModel.from_env()
    profile = profile_program(prog.faithful, prog.model_desc, model, cpu=device == "cpu")
    if not profile.fits:
        # An abstract Session (no Engine) never runs: on any device, a
        # model that allows it reports the overflow instead of refusing.
        if (device == "ipu_model" or session._engine is None) and model.allow_out_of_memory:
            print(f"ipuxl: warning: out of memory on {profile.overflow_tiles.size} tile(s) of "
                  f"the modelled {profile.target['version']}; "
                  f"{'running' if session._engine is not None else 'profiling'} anyway "
                  "(IpuModel(allow_out_of_memory=True)); see session.profile()",
                  file=sys.stderr)
        else:
            raise profile.oom_error(f"the program of Ir {session._ir.id}")
    if report_dir:
        write_report(profile, report_dir)
    for captured, capture_model in captures:
        # ``ipuxl profile`` models an IPU whatever device the script chose.
        captured.append(CapturedSession(
            profile if device != "cpu" else
            profile_program(prog.faithful, prog.model_desc, capture_model or model),
            session, device))
    return profile
