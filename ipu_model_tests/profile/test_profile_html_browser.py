"""The profile's HTML page in a real headless browser (Debian's chromium):
a screenshot must show the matplotlib plots. .ci/run installs chromium;
elsewhere the test skips and says why."""
import os
import shutil
import subprocess

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl import profile as prof

pytestmark = pytest.mark.slow  # starts a headless browser

mpl = pytest.importorskip("matplotlib", reason="the HTML plots need matplotlib "
                          "(pip install 'ipuxl[profile]')")


def _browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _ir(outlined):
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((16, 256), popxl.float32, name="x")
        x = ops.host_load(xs)
        layer = lambda a, w: ops.gelu(a @ w)  # noqa: E731
        ws = [popxl.variable(np.ones((256, 256), np.float32), name=f"w{i}") for i in range(3)]
        if outlined:
            g = ir.create_graph(layer, popxl.TensorSpec((16, 256), popxl.float32),
                                popxl.TensorSpec((256, 256), popxl.float32))
            for w in ws:
                (x,) = ops.call(g, x, w)
        else:
            for w in ws:
                x = layer(x, w)
        ys = popxl.d2h_stream(x.shape, x.dtype, name="y")
        ops.host_store(ys, x)
    return ir


def _has_color(img, rgb, tol=10, min_pixels=200):
    diff = np.abs(img[..., :3].astype(np.int32) - np.array(rgb)).max(axis=-1)
    return int((diff <= tol).sum()) >= min_pixels


def test_page_is_self_contained(tmp_path):
    p = prof.profile_ir(_ir(True), name="outlined")
    path = p.html(str(tmp_path / "profile.html"))
    text = open(path).read()
    assert text.count('<img class="plot"') == 5
    assert "data:image/png;base64," in text and "http" not in text.split("<body>")[1]
    for title in ("Memory per tile", "Memory by category", "Program size by Function",
                  "Liveness over program steps", "Cycles by op"):
        assert title in text


@pytest.mark.skipif(_browser() is None,
                    reason="no headless browser: install Debian's chromium (apt-get install -y "
                           "chromium; .ci/run does) to check the page in a browser")
def test_plots_render_in_headless_chromium(tmp_path):
    a = prof.profile_ir(_ir(False), name="inlined")
    b = prof.profile_ir(_ir(True), name="outlined")
    page = prof.write_html([a, b], str(tmp_path / "compare.html"))
    shot = tmp_path / "shot.png"
    cmd = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--disable-dev-shm-usage", f"--screenshot={shot}", "--window-size=1600,3000",
           "file://" + os.path.abspath(page)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists(), f"chromium wrote no screenshot: {r.stderr[-2000:]}"
    import matplotlib.image as mpimg

    img = (mpimg.imread(str(shot)) * 255).astype(np.uint8)
    assert img.shape[0] >= 2000 and img.shape[1] >= 1500
    # The plots' own colours are on screen: vertex code bars (memory per
    # tile), Function code bars, liveness area, cycles bars.
    for name, rgb in (("vertexCode", (0x1f, 0x77, 0xb4)), ("Function code", (0xff, 0x7f, 0x0e)),
                      ("liveness", (0x94, 0x67, 0xbd)), ("cycles", (0x2c, 0xa0, 0x2c))):
        assert _has_color(img, rgb), f"{name} plot not visible in the screenshot"
    # Both columns have plots: each half of the page has coloured pixels.
    half = img.shape[1] // 2
    assert _has_color(img[:, :half], (0x1f, 0x77, 0xb4))
    assert _has_color(img[:, half:], (0x1f, 0x77, 0xb4))
