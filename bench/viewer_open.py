"""Where the profile viewer's page spends its time opening, in headless
Chromium (the DevTools client of the browser test).

    python bench/viewer_open.py A.html B.html ... [--opens 3]

For each page, alternated open by open: milliseconds from navigation to
the first view drawn (``ipuxlReadyMs``) and to its charts painted
(``ipuxlChartsMs``), the CPU seconds of all the browser's processes, and
from one traced open the main thread's time by trace event (compiling
and running scripts, parsing the HTML, style, layout, paint; nested
events are counted in each of their names). Results of one run are in
bench/results/2026-12-02-viewer.md.
"""
import argparse
import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "ipu_model_tests", "profile"))

from test_profile_html_browser import Chromium  # noqa: E402

EVENTS = ("ParseHTML", "EvaluateScript", "v8.compile", "V8.CompileCode", "v8.run",
          "FunctionCall", "TimerFire", "FireAnimationFrame", "UpdateLayoutTree", "Layout",
          "Paint", "v8.parseOnBackground", "MinorGC", "MajorGC")


def traced_open(b: Chromium, url: str) -> dict:
    """Milliseconds per trace event name on the renderer's main thread
    (and background script parsing) for one open of ``url``."""
    b.send("Tracing.start", transferMode="ReportEvents", traceConfig={
        "includedCategories": ["devtools.timeline", "v8", "disabled-by-default-v8.compile",
                               "blink"]})
    b.open(url)
    b.wait_for("window.ipuxlCharts === true", timeout=120)
    b.send("Tracing.end")
    events, done = [], False
    for e in list(b.events):  # some came in while waiting for replies
        if e.get("method") == "Tracing.dataCollected":
            events += e["params"]["value"]
        done = done or e.get("method") == "Tracing.tracingComplete"
    b.events = [e for e in b.events if not e.get("method", "").startswith("Tracing.")]
    while not done:
        msg = json.loads(b.ws.recv())
        if msg.get("method") == "Tracing.dataCollected":
            events += msg["params"]["value"]
        done = msg.get("method") == "Tracing.tracingComplete"
    ms = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("name") in EVENTS:
            ms[e["name"]] += e.get("dur", 0) / 1e3
    return dict(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--opens", type=int, default=3)
    args = ap.parse_args()
    b = Chromium(tempfile.mkdtemp(prefix="viewer-open-"))
    try:
        res = {p: {"ready": [], "charts": [], "cpu": []} for p in args.pages}
        for _ in range(args.opens):
            for p in args.pages:
                b.open("about:blank", ready="true")
                c0 = b.cpu_seconds()
                b.open("file://" + os.path.abspath(p))
                b.wait_for("window.ipuxlCharts === true", timeout=120)
                res[p]["cpu"].append(b.cpu_seconds() - c0)
                res[p]["ready"].append(b.eval("window.ipuxlReadyMs") / 1e3)
                res[p]["charts"].append(b.eval("window.ipuxlChartsMs") / 1e3)
        for p in args.pages:
            b.open("about:blank", ready="true")
            res[p]["trace_ms"] = traced_open(b, "file://" + os.path.abspath(p))
            res[p]["bytes"] = os.path.getsize(p)
        print(json.dumps({"load_average": os.getloadavg()[0], "cpus": os.cpu_count(),
                          "pages": res}, indent=1))
    finally:
        b.close()


if __name__ == "__main__":
    main()
