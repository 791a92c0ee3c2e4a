"""The profile viewer: one self-contained HTML page (no server, works
offline from a file) for one profile or for a comparison of several.

The page holds one JSON blob (``<script type="application/json"
id="ipuxl-data">``): for each profile, its ``ipuxl-profile-1`` JSON (the
schema in docs/profile.md, as :meth:`Profile.to_dict` writes it) plus a
``label`` and the ``insights`` of :mod:`.insights`. The views are drawn
from that blob in the browser by ``viewer/viewer.js``; the charts are
SVG drawn by ``viewer/charts.js`` (a figure is described as plotly.js
takes it, the subset the views use). The page needs no plotting library:
plotly.js, inlined, made a page 4.6 MB larger and its charts wait about
2 s for the browser to compile it (bench/results/2026-12-02-viewer.md).

Another producer (a Poplar program's autoReport) writes the same JSON;
``write_page([ipuxl.profile.load(path)], out)`` makes its page (the
insights are computed here, from the JSON's columns).
:func:`write_page_from_json` takes :func:`page_data` blobs.
"""
import html as _html
import json
import os
from typing import Dict, List, Optional, Sequence

from .insights import insights

__all__ = ["write_page", "write_page_from_json", "page_data", "unique_labels"]

_ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer")
_VIEWER_FILES = ("viewer.js", "charts.js", "views.js", "program.js", "compare.js")


def _asset(name: str) -> str:
    with open(os.path.join(_ASSETS, name), encoding="utf-8") as f:
        return f.read()


def _compact(v):
    """JSON values with integral floats written as ints (the page's size)."""
    if isinstance(v, float):
        return int(v) if v.is_integer() and abs(v) < 2 ** 53 else round(v, 6)
    if isinstance(v, dict):
        return {k: _compact(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_compact(x) for x in v]
    return v


def page_data(profile, label: Optional[str] = None) -> Dict:
    """The blob of one profile: its JSON, ``label`` and ``insights``."""
    profile.detail()
    d = profile.to_dict()
    d["label"] = label or profile.name or "profile"
    d["insights"] = insights(profile)
    return _compact(d)


def unique_labels(labels: Sequence[str]) -> List[str]:
    """``labels`` with repeats told apart (``" (2)"``, ...), so no two
    columns of a comparison have the same heading."""
    seen: Dict[str, int] = {}
    out = []
    for lab in labels:
        lab = lab or "profile"
        if labels.count(lab) > 1:
            seen[lab] = seen.get(lab, 0) + 1
            lab = f"{lab} ({seen[lab]})"
        out.append(lab)
    return out


def _script_json(obj) -> str:
    # Inside <script>: "</" would end the element.
    return json.dumps(obj, separators=(",", ":")).replace("</", "<\\/")


def write_page_from_json(blobs: List[Dict], path: str, title: Optional[str] = None,
                         links: Optional[List[Dict]] = None) -> str:
    """Writes the page for ``blobs`` (:func:`page_data` dicts; two or more
    make a comparison) to ``path``. ``links``: ``{"label", "href"}`` of
    other pages to list (the other Sessions of one script)."""
    if not blobs:
        raise ValueError("write_page: no profiles to show")
    mode = "compare" if len(blobs) > 1 else "single"
    title = title or ("ipuxl profile: " + blobs[0]["label"] if mode == "single"
                      else "ipuxl profiles compared")
    data = {"mode": mode, "title": title, "profiles": blobs, "links": links or []}
    js = "\n".join(_asset(n) for n in _VIEWER_FILES)
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_html.escape(title)}</title>\n"
        f"<style>{_asset('viewer.css')}</style>\n"
        "</head><body>\n<div id=\"app\"></div>\n"
        f"<script type=\"application/json\" id=\"ipuxl-data\">{_script_json(data)}</script>\n"
        f"<script>{js}</script>\n</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


def write_page(profiles, path: str, title: Optional[str] = None,
               labels: Optional[Sequence[str]] = None,
               links: Optional[List[Dict]] = None) -> str:
    """Writes the page of one :class:`Profile` (or a comparison of
    several, labelled by ``labels`` or their names) to ``path``."""
    profiles = list(profiles)
    labels = unique_labels(list(labels) if labels else [p.name or f"profile {i + 1}"
                                                        for i, p in enumerate(profiles)])
    blobs = [page_data(p, lab) for p, lab in zip(profiles, labels)]
    return write_page_from_json(blobs, path, title=title, links=links)
