"""``write_html``: the profile viewer's page (see :mod:`.page`) for one
profile, or the comparison of several. Kept as the entry point
``ipuxl.profile.write_html`` and ``Profile.html`` have always used."""
from typing import Optional, Sequence

from .page import write_page

__all__ = ["write_html"]


def write_html(profiles, path: str, title: Optional[str] = None,
               labels: Optional[Sequence[str]] = None, links=None) -> str:
    """Writes the page for ``profiles`` (one: its views; several: a
    comparison, labelled by ``labels`` or their names) to ``path``."""
    return write_page(list(profiles), path, title=title, labels=labels, links=links)
