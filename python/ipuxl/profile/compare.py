"""Two profiles side by side (``ipuxl profile --compare a.json b.json``)."""

__all__ = ["compare_text"]


def _fmt(v) -> str:
    return f"{int(v):,}"


def compare_text(a, b) -> str:
    na, nb = a.name or "a", b.name or "b"
    ta, tb = a.totals, b.totals
    w = 24
    lines = [f"{'':<{w}}{na[:16]:>18}{nb[:16]:>18}{'b - a':>16}{'b / a':>8}"]

    def row(label, va, vb):
        ratio = f"{vb / va:.2f}" if va else "-"
        lines.append(f"{label:<{w}}{_fmt(va):>18}{_fmt(vb):>18}{_fmt(vb - va):>16}{ratio:>8}")

    for c in a.categories:
        if ta.get(c, 0) or tb.get(c, 0):
            row(c, ta.get(c, 0), tb.get(c, 0))
    row("code (all kinds)", ta["code"], tb["code"])
    row("always live", ta["alwaysLive"], tb["alwaysLive"])
    row("total", ta["total"], tb["total"])
    row("max bytes on a tile", int(a.total_per_tile.max()), int(b.total_per_tile.max()))
    row("cycles", a.cycles, b.cycles)
    for p, n in ((a, na), (b, nb)):
        fns = p.functions()
        if fns:
            lines.append(f"{n}: " + ", ".join(
                f"{g['name']} ({g['code_instances']} instance(s), {g['call_sites']} call(s), "
                f"{g['if_sites']} if site(s), {g['code_bytes']:,} B)" for g in fns[:6]))
    for p, n in ((a, na), (b, nb)):
        if not p.fits:
            lines.append(f"{n}: OUT OF MEMORY on {p.overflow_tiles.size} tile(s)")
    return "\n".join(lines)
