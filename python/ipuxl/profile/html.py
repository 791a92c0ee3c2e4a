"""One self-contained HTML page of profiles, with plots drawn by matplotlib
(the optional extra ``ipuxl[profile]``), embedded as PNG data URIs: memory
per tile by category, memory by category, program size by Function,
liveness over program steps and cycles by op. Several profiles are shown
side by side (``ipuxl profile --compare``)."""
import base64
import html as _html
import io
from typing import List, Optional

import numpy as np

__all__ = ["write_html", "figures"]

_COLORS = {
    "vertexCode": "#1f77b4", "vertexInstanceState": "#aec7e8", "copyDescriptor": "#c5b0d5",
    "controlCode": "#ff7f0e", "internalExchangeCode": "#2ca02c", "hostExchangeCode": "#98df8a",
    "globalExchangeCode": "#bcbd22", "stack": "#7f7f7f", "variables": "#d62728",
    "constants": "#ff9896", "notAlwaysLive": "#9467bd",
}


def _mpl():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("ipuxl profile plots need matplotlib: pip install 'ipuxl[profile]' "
                          "(or pip install matplotlib)") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def figures(p) -> List[tuple]:
    """``(id, title, base64 PNG)`` of each plot of profile ``p``."""
    plt = _mpl()
    out = []
    n = p.num_tiles
    # 1. memory per tile, stacked by category, with the tile's memory.
    fig, ax = plt.subplots(figsize=(9, 3.4))
    # Many tiles: one bar per bin of `step` tiles, each category at the
    # bin's largest value (KiB).
    step = max(1, int(np.ceil(n / 736)))
    starts = np.arange(0, n, step)
    bottom = np.zeros(starts.size)
    for c in p.categories:
        v = p.per_tile[c]
        if not v.any():
            continue
        vb = np.maximum.reduceat(v, starts) / 1024
        ax.bar(starts, vb, width=step, align="edge", bottom=bottom, color=_COLORS.get(c),
               label=c, linewidth=0)
        bottom += vb
    title = "Memory per tile"
    limit = p.memory_per_tile / 1024
    top = float(bottom.max()) if bottom.size else 0.0
    if limit and top >= 0.2 * limit:  # the limit line, when it is on the same scale
        ax.axhline(limit, color="black", linestyle="--", linewidth=1, label="tile memory")
    elif limit:
        title += f" (tile memory {limit:,.0f} KiB, off scale)"
    ax.set_xlabel("tile")
    ax.set_ylabel("KiB")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    out.append(("tiles", "Memory per tile", _png(fig)))
    # 2. memory by category.
    fig, ax = plt.subplots(figsize=(6, 3.4))
    t = p.totals
    cats = [c for c in p.categories if t[c]]
    ax.barh(cats, [t[c] / 2**20 for c in cats], color=[_COLORS.get(c) for c in cats])
    ax.set_xlabel("MiB (all tiles)")
    ax.set_title("Memory by category")
    ax.invert_yaxis()
    out.append(("categories", "Memory by category", _png(fig)))
    # 3. program size by Function.
    fig, ax = plt.subplots(figsize=(6, 3.4))
    gs = [g for g in p.graphs if g["code_instances"]]
    gs.sort(key=lambda g: -g["code_bytes"] * g["code_instances"])
    gs = gs[:15]
    names = [("main" if g["main"] else g["name"])[:28] + f" x{g['code_instances']}" for g in gs]
    ax.barh(names, [g["code_bytes"] * g["code_instances"] / 1024 for g in gs], color="#ff7f0e")
    ax.set_xlabel("KiB of code and vertex state (all instances, all tiles)")
    ax.set_title("Program size by Function")
    ax.invert_yaxis()
    out.append(("functions", "Program size by Function", _png(fig)))
    # 4. liveness over program steps.
    fig, ax = plt.subplots(figsize=(9, 3.0))
    live = np.asarray(p.steps["live_bytes"], dtype=np.float64)
    if live.size:
        ax.plot(np.arange(live.size), live / 2**20, color="#9467bd", drawstyle="steps-post")
        ax.fill_between(np.arange(live.size), live / 2**20, step="post", color="#9467bd",
                        alpha=0.3)
    ax.set_xlabel("program step (main program)")
    ax.set_ylabel("MiB not always live")
    ax.set_title("Liveness over program steps")
    out.append(("liveness", "Liveness over program steps", _png(fig)))
    # 5. cycles by op.
    fig, ax = plt.subplots(figsize=(6, 3.6))
    rows = [r for r in p.op_table(n=15) if r["total_cycles"] > 0]
    ax.barh([r["label"][-34:] for r in rows], [r["total_cycles"] for r in rows], color="#2ca02c")
    ax.set_xlabel("cycles (x executions)")
    ax.set_title("Cycles by op")
    ax.invert_yaxis()
    out.append(("cycles", "Cycles by op", _png(fig)))
    return out


def _summary_table(p) -> str:
    t = p.totals
    rows = "".join(f"<tr><td>{c}</td><td>{t[c]:,}</td><td>{int(p.per_tile[c].max()):,}</td></tr>"
                   for c in p.categories)
    rows += (f"<tr><th>always live</th><th>{t['alwaysLive']:,}</th><th></th></tr>"
             f"<tr><th>total</th><th>{t['total']:,}</th>"
             f"<th>{int(p.total_per_tile.max()):,}</th></tr>")
    status = "fits" if p.fits else f"OUT OF MEMORY on {p.overflow_tiles.size} tile(s)"
    tgt = p.target
    head = (f"<p>{_html.escape(tgt['version'])}: {tgt['num_ipus']} IPU(s) x "
            f"{tgt['tiles_per_ipu']} tiles, {p.memory_per_tile:,} B per tile &mdash; "
            f"<b>{status}</b>; {p.cycles:,} cycles ({p.seconds * 1e6:,.1f} &micro;s)</p>")
    return (head + "<table><tr><th>category</th><th>bytes (all tiles)</th><th>max per tile</th>"
            f"</tr>{rows}</table>")


def write_html(profiles, path: str, title: Optional[str] = None) -> str:
    """Writes the page for ``profiles`` (one or more, side by side) to ``path``."""
    title = title or ("ipuxl profile" if len(profiles) == 1 else "ipuxl profiles compared")
    cols = []
    for i, p in enumerate(profiles):
        figs = figures(p)
        name = _html.escape(p.name or f"profile {i + 1}")
        imgs = "".join(f'<h3>{_html.escape(t)}</h3><img class="plot" id="{fid}-{i}" alt="{t}" '
                       f'src="data:image/png;base64,{b64}">' for fid, t, b64 in figs)
        warns = "".join(f"<p class='warn'>{_html.escape(w)}</p>" for w in p.warnings)
        cols.append(f'<div class="col"><h2>{name}</h2>{_summary_table(p)}{warns}{imgs}</div>')
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{_html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; }}
.row {{ display: flex; gap: 2em; align-items: flex-start; }}
.col {{ flex: 1; min-width: 0; }}
img.plot {{ max-width: 100%; display: block; margin-bottom: 1em; }}
table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }}
.warn {{ color: #a00; }}
</style></head>
<body><h1>{_html.escape(title)}</h1>
<p>Estimates of ipuxl's analytical IPU model (docs/ipu_model.md), not measurements.</p>
<div class="row">{''.join(cols)}</div>
</body></html>
"""
    with open(path, "w") as f:
        f.write(page)
    return path
