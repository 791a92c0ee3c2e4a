"""The profile viewer's page (python/ipuxl/profile/page.py) for one
profile and for a comparison: its data blob, and the page in a real
headless browser (Debian's chromium, driven over the DevTools protocol
with websocket-client): every view present and populated, a click on a
tile lists its tensors, a call expands into its Function in the liveness
view and the program tree; screenshots of each view are written under
pytest's tmp_path. It also measures how fast the MNIST training
session's page and a 10,000-op program's page open::

    pytest ipu_model_tests/profile/test_profile_html_browser.py -k open_time -s

.ci/run installs chromium; without it (or websocket-client) the browser
tests skip and say why.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import profile as prof

pytestmark = pytest.mark.slow  # starts a headless browser

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


# ---- a small DevTools client


def browser_path():
    """Debian's chromium (or another Chromium-based browser), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """One headless Chromium with one page, driven over DevTools."""

    def __init__(self, user_dir: str, width: int = 1400, height: int = 1000,
                 timeout: float = 60.0):
        import websocket  # websocket-client

        self.timeout = timeout
        self.proc = subprocess.Popen(
            [browser_path(), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-dev-shm-usage", "--hide-scrollbars", "--remote-debugging-port=0",
             f"--user-data-dir={user_dir}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._port(user_dir)
        pages = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list",
                                                 timeout=timeout))
        page = next(p for p in pages if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=timeout,
                                              suppress_origin=True)
        self._id = 0
        self.events = []
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _port(self, user_dir: str) -> int:
        # Chromium writes the port it chose to DevToolsActivePort.
        path = os.path.join(user_dir, "DevToolsActivePort")
        end = time.time() + self.timeout
        while time.time() < end:
            if os.path.exists(path):
                text = open(path).read().split()
                if text:
                    return int(text[0])
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited: {self.proc.stderr.read()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def send(self, method: str, **params):
        self._id += 1
        mid = self._id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            self.events.append(msg)

    def open(self, url: str, ready: str = "window.ipuxlReady === true") -> float:
        """Navigates to ``url`` and waits until ``ready`` is true; returns
        the wall-clock seconds that took."""
        t0 = time.perf_counter()
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        self.wait_for(ready)
        return time.perf_counter() - t0

    def eval(self, expr: str):
        """The value of JavaScript ``expr`` (JSON-able); a thrown error raises."""
        r = self.send("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:200]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expr: str, timeout: float = None):
        end = time.time() + (timeout or self.timeout)
        while time.time() < end:
            if self.eval(f"!!({expr})"):
                return
            time.sleep(0.05)
        errors = [e for e in self.events if e.get("method") in ("Runtime.exceptionThrown",
                                                                  "Runtime.consoleAPICalled")]
        raise TimeoutError(f"not true in time: {expr}; page said {str(errors)[-2000:]}")

    def click_at(self, x: float, y: float):
        """A real mouse click (move, press, release) at page point (x, y)."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=1 if kind != "mouseMoved" else 0)

    def hover_at(self, x: float, y: float):
        """Moves the mouse to page point (x, y)."""
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def screenshot(self, path: str, full_page: bool = True):
        params = {"format": "png"}
        if full_page:
            m = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": m["width"], "height": m["height"],
                              "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", **params)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of the browser and all its processes
        so far, from /proc (0 where there is none): a measure of the work
        a page takes that does not depend on how busy the machine is."""
        if not os.path.isdir("/proc"):
            return 0.0
        parent, ticks = {}, {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(d)] = int(fields[1])
            ticks[int(d)] = int(fields[11]) + int(fields[12])
        total = 0
        for pid, t in ticks.items():
            q = pid
            while q in parent and q != self.proc.pid and q > 1:
                q = parent[q]
            if q == self.proc.pid:
                total += t
        return total / os.sysconf("SC_CLK_TCK")

    def page_errors(self):
        """Exceptions the page threw so far."""
        return [e for e in self.events if e.get("method") == "Runtime.exceptionThrown"]

    def close(self):
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _skip_reason():
    if browser_path() is None:
        return ("no headless browser: install Debian's chromium (apt-get install -y chromium; "
                ".ci/run does) to check the page in a browser")
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "the browser tests drive chromium with websocket-client (pip install 'ipuxl[test]')"
    return None


needs_browser = pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or "")


@pytest.fixture(scope="module")
def browser():
    b = Chromium(tempfile.mkdtemp(prefix="ipuxl-chromium-"), width=1400, height=1000)
    yield b
    b.close()


# ---- programs
def _ir(outlined, width=256):
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((16, width), popxl.float32, name="x")
        x = ops.host_load(xs)
        layer = lambda a, w: ops.gelu(a @ w)  # noqa: E731
        ws = [popxl.variable(np.ones((width, width), np.float32), name=f"w{i}") for i in range(3)]
        if outlined:
            g = ir.create_graph(layer, popxl.TensorSpec((16, width), popxl.float32),
                                popxl.TensorSpec((width, width), popxl.float32))
            for w in ws:
                (x,) = ops.call(g, x, w)
        else:
            for w in ws:
                x = layer(x, w)
        ys = popxl.d2h_stream(x.shape, x.dtype, name="y")
        ops.host_store(ys, x)
    return ir


def _many_ops_ir(n_ops):
    """A program of ``n_ops`` ops in name scopes of about 100, calling a
    Function every 25th step."""
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((16, 64), popxl.float32, name="x")
        x = ops.host_load(xs)
        g = ir.create_graph(lambda a: ops.gelu(a * 0.5 + 1.0),
                            popxl.TensorSpec((16, 64), popxl.float32))
        k = i = 0
        while k < n_ops:
            with popxl.name_scope(f"block{k // 100}"):
                if i % 25 == 0:
                    (x,) = ops.call(g, x)
                    k += 1
                elif i % 3:
                    x = ops.relu(x * 1.001)
                    k += 2
                else:
                    x = ops.tanh(x)
                    k += 1
            i += 1
        ys = popxl.d2h_stream(x.shape, x.dtype, name="y")
        ops.host_store(ys, x)
    return ir


SMALL = prof.IpuModel(tiles_per_ipu=32)


def _blob(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="ipuxl-data">(.*?)</script>', text, re.S)
    assert m, "no data blob in the page"
    return text, json.loads(m.group(1))


# ---- the page without a browser
def test_page_is_self_contained(tmp_path):
    p = prof.profile_ir(_ir(True), SMALL, name="outlined")
    path = p.html(str(tmp_path / "profile.html"))
    text, data = _blob(path)
    # Scripts inline; nothing loaded from elsewhere.
    assert "<script src=" not in text and not re.search(r'(src|href)="(https?:)?//', text)
    assert os.path.getsize(path) < 10 * 2**20
    assert data["mode"] == "single" and len(data["profiles"]) == 1
    d = data["profiles"][0]
    assert d["format"] == "ipuxl-profile-1" and d["label"] == "outlined"
    # The viewer's columns: the calls' callees and every Function's steps.
    (fn,) = [g["name"] for g in d["graphs"] if g["function"]]
    calls = [i for i, t in enumerate(d["ops"]["type"]) if t == "Call"]
    assert len(calls) == 3 and all(d["ops"]["callees"][i] == [fn] for i in calls)
    assert d["function_steps"][fn]["label"] == ["matmul", "gelu"]
    assert {"top_tiles", "histogram", "suggestions", "by_scope"} <= set(d["insights"])
    assert sum(d["insights"]["histogram"]["counts"]) == p.num_tiles


def test_comparison_labels_are_distinct(tmp_path):
    a = prof.profile_ir(_ir(False), SMALL, name="prog.py session 1")
    b = prof.profile_ir(_ir(True), SMALL, name="prog.py session 1")
    _, data = _blob(prof.write_html([a, b], str(tmp_path / "c.html")))
    labels = [d["label"] for d in data["profiles"]]
    assert data["mode"] == "compare" and len(set(labels)) == 2


def test_the_viewer_ships_in_the_wheel():
    # scikit-build-core copies every file of python/ipuxl that git does not ignore.
    from ipuxl.profile import page

    files = ("viewer.js", "charts.js", "views.js", "program.js", "compare.js", "viewer.css")
    for f in files:
        assert os.path.isfile(os.path.join(page._ASSETS, f)), f
    root = os.path.join(os.path.dirname(page._ASSETS), "..", "..", "..")
    if shutil.which("git") and os.path.isdir(os.path.join(root, ".git")) or \
            os.path.isfile(os.path.join(root, ".git")):
        r = subprocess.run(["git", "check-ignore"] + [os.path.join(page._ASSETS, f) for f in files],
                           cwd=root, capture_output=True, text=True)
        assert r.stdout == "", f"git ignores viewer files, so the wheel would lack them: {r.stdout}"


# ---- the page in headless Chromium
VIEWS = ("summary", "memory", "categories", "liveness", "tree", "operations", "trace")


def _show(b, view):
    b.eval(f"document.querySelector('nav button[data-view={view}]').click()")
    b.wait_for(f"document.body.dataset.view === '{view}' && window.ipuxlCharts === true")


def _rows(b, table_id):
    return b.eval(f"Array.from(document.querySelectorAll('#{table_id} tr')).slice(1)"
                  ".map(tr => Array.from(tr.cells).map(c => c.textContent))")


def _plot_points(b, div_id):
    return b.eval(f"(document.getElementById('{div_id}').data || [])"
                  ".reduce((n, t) => n + ((t.x || t.y || []).length), 0)")


@needs_browser
def test_every_view_is_populated(browser, tmp_path):
    p = prof.profile_ir(_ir(True), SMALL, name="outlined")
    page = p.html(str(tmp_path / "profile.html"))
    browser.open("file://" + page)
    for view in VIEWS:
        _show(browser, view)
        browser.screenshot(str(tmp_path / f"view_{view}.png"))
        # Table rows, tree leaves, and charts with data.
        n = browser.eval(f"document.querySelectorAll('#view-{view} tr, #view-{view} .leaf').length"
                         f" + Array.from(document.querySelectorAll('#view-{view} .chart'))"
                         ".filter(d => d.data && d.data.some(t => (t.x || []).length)).length")
        assert n > 0, f"{view}: nothing drawn"
    assert browser.page_errors() == []
    _show(browser, "summary")
    assert len(_rows(browser, "top-tiles")) == 10
    assert browser.eval("document.querySelectorAll('#view-summary svg rect.hbar').length") > 0
    _show(browser, "memory")
    # one stacked bar per tile for each category with bytes
    cats = [c for c in p.categories if p.per_tile[c].any()]
    assert _plot_points(browser, "plot-tiles") == len(cats) * p.num_tiles
    _show(browser, "liveness")
    assert len(_rows(browser, "liveness-steps")) == len(p.steps["kind"])
    assert _plot_points(browser, "plot-liveness") == 2 * len(p.steps["kind"])
    _show(browser, "operations")
    assert len(_rows(browser, "ops-table")) == len(p.ops["name"])
    labels = {r[0] for r in _rows(browser, "ops-table")}
    assert {r["label"] for r in p.op_table()} == labels
    _show(browser, "trace")
    assert _plot_points(browser, "plot-trace") >= len(p.steps["kind"])
    # Hovering a step of the trace names it and its cycles. The chart may
    # still be laying out after the view is shown (its pixels move) and the
    # tooltip is drawn on a later frame: locate the step and hover until the
    # tooltip names a step, rather than race either.
    tip = ""
    for _ in range(40):
        x, y = browser.eval("""(() => { const d = document.getElementById('plot-trace');
            const t = d.data.find((t) => t.name === 'Execute');
            return d.chart.pixel((t.x[0] + t.x[1]) / 2, t.y[0]); })()""")
        browser.hover_at(x, y)
        time.sleep(0.05)
        tip = browser.eval("(document.querySelector('#plot-trace .chart-tip') || {}).textContent || ''")
        if tip.startswith("Execute "):
            break
    assert tip.startswith("Execute ") and "cycles from cycle" in tip, tip
    # Dragging zooms into those cycles; a double click resets.
    for kind, px in (("mousePressed", x), ("mouseMoved", x + 200), ("mouseReleased", x + 200)):
        browser.send("Input.dispatchMouseEvent", type=kind, x=px, y=y, button="left", clickCount=1)
    # the zoom, like the tooltip, is applied on a later frame: wait for it
    browser.wait_for("document.getElementById('plot-trace').chart.zoom.x")
    zoom = browser.eval("document.getElementById('plot-trace').chart.zoom.x")
    full = browser.eval("document.getElementById('plot-trace').chart.axes.x.auto")
    assert zoom and full[0] <= zoom[0] < zoom[1] <= full[1] and zoom[1] - zoom[0] < full[1] - full[0]
    browser.send("Input.dispatchMouseEvent", type="mousePressed", x=x, y=y, button="left", clickCount=2)
    browser.send("Input.dispatchMouseEvent", type="mouseReleased", x=x, y=y, button="left", clickCount=2)
    browser.wait_for("Object.keys(document.getElementById('plot-trace').chart.zoom).length === 0")
    assert browser.eval("Object.keys(document.getElementById('plot-trace').chart.zoom).length") == 0
    for view in VIEWS:
        assert os.path.getsize(tmp_path / f"view_{view}.png") > 10000


@needs_browser
def test_clicking_a_tile_lists_its_tensors(browser, tmp_path):
    # 32 KB tiles: the tiles holding the most are over, and coloured
    # (width 200: the layouts leave some tiles nearly empty).
    mem = 32000
    model = prof.IpuModel(tiles_per_ipu=32, memory_per_tile=mem)
    p = prof.profile_ir(_ir(True, width=200), model, name="tight")
    assert 0 < p.overflow_tiles.size < p.num_tiles
    browser.open("file://" + p.html(str(tmp_path / "profile.html")))
    _show(browser, "memory")
    over = browser.eval("document.getElementById('plot-tiles').data"
                        ".find(t => t.name.startsWith('over')).x")
    assert over == p.overflow_tiles.tolist()
    target = int(p.overflow_tiles[0])
    x, y = browser.eval(f"""(() => {{
        const d = document.getElementById('plot-tiles');
        const top = ipuxl.totalPerTile(ipuxl.profile())[{target}] / 1024;
        return d.chart.pixel({target}, top / 2); }})()""")
    # Hovering shows the tile's categories; a click opens the tile.
    browser.hover_at(x, y)
    tip = browser.eval("document.querySelector('#plot-tiles .chart-tip').textContent")
    assert tip.startswith(str(target)) and "variables:" in tip and "OVER" in tip, tip
    browser.click_at(x, y)
    browser.wait_for(f"document.getElementById('tile-title').textContent.startsWith('Tile {target} ')")
    browser.screenshot(str(tmp_path / "tile_clicked.png"))
    listed = [(r[0], int(r[1].replace(",", ""))) for r in _rows(browser, "tile-tensors")]
    want = [(n, on) for n, on, _, _ in p.tensors_on_tile(target, n=10**6)]
    assert listed and listed == want
    assert "OVER" in browser.eval("document.getElementById('tile-title').textContent")
    # The scale buttons: the tile memory, or the data.
    rng = "document.getElementById('plot-tiles').layout.yaxis.range[1]"
    browser.eval("document.querySelectorAll('#plot-tiles .chart-menu button')[1].click()")
    data_top = browser.eval(rng)
    browser.eval("document.querySelectorAll('#plot-tiles .chart-menu button')[0].click()")
    assert browser.eval(rng) >= mem / 1024 and data_top != browser.eval(rng)
    assert len(_rows(browser, "tile-vertices")) > 0


@needs_browser
def test_a_call_expands_into_its_function(browser, tmp_path):
    p = prof.profile_ir(_ir(True), SMALL, name="outlined")
    (fn,) = [g["name"] for g in p.functions()]
    inner = p.detail()["function_steps"][fn]["label"]
    browser.open("file://" + p.html(str(tmp_path / "profile.html")))
    _show(browser, "liveness")
    n = len(p.steps["kind"])
    browser.eval("document.querySelector('#liveness-steps [data-expand]').click()")
    browser.wait_for(f"document.querySelectorAll('#liveness-steps tr').length === {n + 1 + len(inner)}")
    got = browser.eval("Array.from(document.querySelectorAll('#liveness-steps tr.inner'))"
                       ".map(tr => tr.cells[3].textContent)")
    assert got == inner
    assert _plot_points(browser, "plot-liveness") == 2 * (n + len(inner))
    # The step diff of an inner step names the Function.
    browser.eval("document.querySelector('#liveness-steps tr.inner').click()")
    assert fn in browser.eval("document.getElementById('step-diff').textContent")
    # Clicking a bar of the chart shows that step's diff (step 2: its bar's middle).
    x, y = browser.eval("""(() => { const d = document.getElementById('plot-liveness');
        const [a, b] = d.data, under = a.visible === true ? a.y[2] : 0;
        return d.chart.pixel(2, under + b.y[2] / 2); })()""")
    browser.click_at(x, y)
    browser.wait_for("document.getElementById('step-diff').textContent.startsWith('Step 2:')")
    # The legend shows and hides the always-live bytes.
    vis = "document.getElementById('plot-liveness').data[0].visible"
    before = browser.eval(vis)
    browser.eval("document.querySelector('#plot-liveness .chart-legend [data-curve=\"0\"]').click()")
    assert browser.eval(vis) == ("legendonly" if before is True else True)
    browser.screenshot(str(tmp_path / "liveness_expanded.png"))
    # The program tree: Call -> Function, with the Function's steps.
    _show(browser, "tree")
    browser.eval("const d = document.querySelector('#program-tree details[data-kind=Call]');"
                 "d.open = true; d.dispatchEvent(new Event('toggle'));")
    sel = json.dumps(f'#program-tree details[data-graph="{fn}"]')
    browser.wait_for(f"document.querySelector({sel})")
    leaves = browser.eval(f"Array.from(document.querySelector({sel})"
                          ".querySelectorAll(':scope > .leaf b')).map(b => b.textContent)")
    assert leaves == inner
    browser.screenshot(str(tmp_path / "tree_expanded.png"))


@needs_browser
def test_comparison_view(browser, tmp_path):
    a = prof.profile_ir(_ir(False), SMALL, name="inlined")
    b = prof.profile_ir(_ir(True), SMALL, name="outlined")
    page = prof.write_html([a, b], str(tmp_path / "compare.html"))
    browser.open("file://" + page)
    browser.wait_for("window.ipuxlCharts === true")
    browser.screenshot(str(tmp_path / "compare.png"))
    heads = browser.eval("Array.from(document.querySelectorAll('#compare-categories th'))"
                         ".map(th => th.textContent)")
    assert heads[:3] == ["", "A", "B"] and "B − A" in heads
    labels = browser.eval("Array.from(document.querySelectorAll('#compare-labels .v'))"
                          ".map(e => e.textContent)")
    assert labels == ["inlined", "outlined"]
    rows = {r[0]: r for r in _rows(browser, "compare-categories")}
    for cat in ("vertexCode", "controlCode", "internalExchangeCode", "code", "total"):
        want = b.totals[cat] - a.totals[cat]
        assert int(rows[cat][3].replace(",", "").replace("+", "").replace("\u2212", "-")) == want
    fns = {r[0]: r for r in _rows(browser, "compare-functions")}
    (fn,) = [g["name"] for g in b.functions()]
    assert fn in fns and "main" in fns
    for div in ("plot-compare-categories", "plot-compare-delta", "plot-compare-functions",
                "plot-compare-tiles", "plot-compare-liveness"):
        assert _plot_points(browser, div) > 0, div
    # The views of either profile, from the selector.
    browser.eval("const s = document.getElementById('profile-select'); s.value = '1';"
                 "s.dispatchEvent(new Event('change'));")
    _show(browser, "summary")
    assert "outlined" in browser.eval("document.querySelector('header').textContent")
    assert browser.page_errors() == []


def _training_session_profile():
    sys.path.insert(0, EXAMPLES)
    try:
        import mnist_addons
    finally:
        sys.path.remove(EXAMPLES)
    session = mnist_addons.train_program(32, 0.05, False, "ipu_model")[0]
    p = session.profile()
    p.name = "mnist_addons.py training session"
    return p


@needs_browser
@pytest.mark.parametrize("program", ["mnist_training", "10000_ops"])
def test_open_time_and_size(browser, tmp_path, program):
    """Prints how fast the page opens (no wall-clock assert: the machine
    may be busy): navigation to the first view drawn and to its charts
    drawn, three times; then the page opened straight onto each chart view
    (``page.html#memory``), each view's own drawing time, and the CPU time
    of all the browser's processes, which does not depend on the load."""
    p = _training_session_profile() if program == "mnist_training" else \
        prof.profile_ir(_many_ops_ir(10000), name="10,000 ops")
    if program == "10000_ops":
        assert len(p.ops["name"]) >= 10000
    page = p.html(str(tmp_path / f"{program}.html"))
    size = os.path.getsize(page)
    times, cpu = [], []
    for _ in range(3):
        c0 = browser.cpu_seconds()
        browser.open("file://" + page)
        c1 = browser.cpu_seconds()
        browser.wait_for("window.ipuxlCharts === true", timeout=60)
        cpu.append((c1 - c0, browser.cpu_seconds() - c0))
        times.append((browser.eval("window.ipuxlReadyMs") / 1e3,
                      browser.eval("window.ipuxlChartsMs") / 1e3))
    browser.screenshot(str(tmp_path / f"{program}.png"))
    direct = {}
    for view in ("memory", "liveness", "trace"):
        browser.open("about:blank", ready="true")  # else #view only scrolls the page
        c0 = browser.cpu_seconds()
        browser.open(f"file://{page}#{view}")
        browser.wait_for("window.ipuxlCharts === true", timeout=60)
        assert browser.eval("document.body.dataset.view") == view
        direct[view] = (browser.eval("window.ipuxlChartsMs") / 1e3, browser.cpu_seconds() - c0)
        browser.screenshot(str(tmp_path / f"{program}_{view}.png"))
    # Every view opens on the big page too; each view's drawing time.
    browser.open("about:blank", ready="true")
    browser.open("file://" + page)
    browser.wait_for("window.ipuxlCharts === true", timeout=60)
    switch = []
    for view in VIEWS:
        t0 = time.perf_counter()
        _show(browser, view)
        switch.append(time.perf_counter() - t0)
    draw = browser.eval("window.ipuxlDrawMs || {}")
    print(f"\n{program}: {size / 2**20:.2f} MiB, {len(p.ops['name'])} ops; first view drawn "
          f"after {', '.join(f'{r:.2f}' for r, _ in times)} s, its charts after "
          f"{', '.join(f'{c:.2f}' for _, c in times)} s (3 opens; CPU of all the browser's "
          f"processes to the first view {', '.join(f'{a:.2f}' for a, _ in cpu)} s, to the "
          f"charts {', '.join(f'{b:.2f}' for _, b in cpu)} s); opened on a chart view, charts "
          f"drawn after " + ", ".join(f"{v} {w:.2f} s (CPU {c:.2f} s)" for v, (w, c) in direct.items())
          + f"; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; view switch "
          + ", ".join(f"{v} {s:.2f} s" for v, s in zip(VIEWS, switch)) + "; drawing "
          + ", ".join(f"{v} {draw.get(v, 0) / 1e3:.2f} s" for v in VIEWS))
    assert size < 10 * 2**20
    assert browser.page_errors() == []


def _other_producer_profile():
    """The smallest profile of docs/profile.md's schema, written by hand as
    another producer would: one IPU of 4 tiles, two ops, a call, no
    optional keys."""
    cats = ["vertexCode", "variables", "notAlwaysLive"]
    return {
        "format": "ipuxl-profile-1", "name": "hand-written",
        "target": {"version": "ipu2", "tiles_per_ipu": 4, "num_ipus": 1, "num_io_tiles": 0,
                   "memory_per_tile": 1000, "clock_hz": 1.0e9},
        "categories": cats,
        "per_tile": {"vertexCode": [100, 100, 100, 100], "variables": [400, 400, 0, 0],
                     "notAlwaysLive": [50, 50, 50, 950]},
        "total_cycles": 300,
        "ops": {"name": ["mul", "call"], "type": ["Mul", "Call"], "kind": ["kernel", "call"],
                "cost_class": ["elementwise", "call"], "graph": ["main", "main"],
                "vertex": ["popops::BinaryOp", ""], "plan": ["", ""], "ipu": [0, 0],
                "tiles": [4, 0], "cycles": [100, 200], "compute_cycles": [80, 0],
                "exchange_cycles": [20, 0], "executions": [1, 1], "flops": [16, 0],
                "temp_bytes": [0, 0], "state_bytes": [32, 0], "exchange_code_bytes": [64, 0],
                "control_code_bytes": [16, 8]},
        "graphs": [{"name": "main", "main": True, "function": False, "code_instances": 1,
                    "call_sites": 0, "if_sites": 0, "code_loaded": False, "executions": 1,
                    "cycles": 300, "code_bytes": 400, "ops": 2}],
        "steps": {"kind": ["Execute", "Call"], "label": ["mul", "call"], "op": [0, 1],
                  "cycles": [100, 200], "live_bytes": [200, 1050], "max_tile_live": [50, 900]},
        "tensors": {"name": ["w", "x"], "graph": ["main", "main"], "bytes": [800, 200],
                    "ipu": [0, 0], "first_tile": [0, 0], "tiles": [2, 4],
                    "bytes_per_tile": [400, 50], "always_live": [1, 0]},
        "vertex_types": {"popops::BinaryOp": {"code_bytes": 100, "tiles": 4}},
    }


def test_a_profile_from_another_producer(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_other_producer_profile()))
    p = prof.load(str(path))
    assert p.totals["total"] == 2300 and p.overflow_tiles.tolist() == [3]
    page = p.html(str(tmp_path / "profile.html"))
    _, data = _blob(page)
    d = data["profiles"][0]
    assert d["summary"]["overflow_tiles"] == 1 and d["insights"]["top_tiles"][0]["tile"] == 3
    if _skip_reason() is not None:
        return
    b = Chromium(tempfile.mkdtemp(prefix="ipuxl-chromium-"))
    try:
        b.open("file://" + page)
        for view in VIEWS:
            _show(b, view)
        assert b.page_errors() == []
        _show(b, "memory")
        b.eval("ipuxl.selectTile(0)")
        assert [r[0] for r in _rows(b, "tile-tensors")] == ["w", "x"]
    finally:
        b.close()


def test_include_gaps(tmp_path):
    """PopVision's "include gaps": a producer's gaps_per_tile are stacked
    on request, count towards the tile's memory, and are listed for a tile;
    a profile without them (every ipuxl one) has the box disabled."""
    d = _other_producer_profile()
    d["gaps_per_tile"] = [8, 0, 900, 40]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(d))
    p = prof.load(str(path))
    assert p.gaps_per_tile.tolist() == [8, 0, 900, 40]
    bad = dict(d, gaps_per_tile=[1, 2])
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="gaps_per_tile has 2 entries, expected one per tile"):
        prof.load(str(tmp_path / "bad.json"))
    page = p.html(str(tmp_path / "profile.html"))
    plain = prof.profile_ir(_ir(True), SMALL, name="no gaps")
    assert plain.gaps_per_tile is None
    plain_page = plain.html(str(tmp_path / "plain.html"))
    if _skip_reason() is not None:
        pytest.skip(_skip_reason())
    b = Chromium(tempfile.mkdtemp(prefix="ipuxl-chromium-"))
    try:
        b.open("file://" + page)
        _show(b, "memory")
        names = lambda: b.eval("document.getElementById('plot-tiles').data.map(t => t.name)")  # noqa: E731
        over = lambda: b.eval("document.getElementById('plot-tiles').data"  # noqa: E731
                              ".find(t => t.name.startsWith('over')).x")
        assert "gaps" not in names() and over() == [3]
        b.eval("const c = document.getElementById('include-gaps'); c.click();")
        b.wait_for("document.getElementById('plot-tiles').data.some(t => t.name === 'gaps')")
        gaps = b.eval("document.getElementById('plot-tiles').data.find(t => t.name === 'gaps').y")
        assert np.allclose(np.array(gaps) * 1024, d["gaps_per_tile"])
        # Tile 2: 150 B of data and 900 B of gaps is over the 1000 B tile.
        assert over() == [2, 3]
        b.eval("ipuxl.selectTile(2)")
        cats = {r[0]: r[1] for r in _rows(b, "tile-detail table")}
        assert cats.get("gaps") == "900"
        b.screenshot(str(tmp_path / "gaps.png"))
        b.open("file://" + plain_page)
        _show(b, "memory")
        assert b.eval("document.getElementById('include-gaps').disabled") is True
        assert b.page_errors() == []
    finally:
        b.close()
