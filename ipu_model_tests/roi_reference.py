"""A float64 NumPy transcription of torchvision.ops.roi_align (aligned=False),
the oracle of ops.roi_align and of its Poplar export."""
import numpy as np


def roi_align_reference(x, rois, bidx, ph, pw, scale, ratio):
    """torchvision.ops.roi_align (aligned=False), transcribed in NumPy."""
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))

    def bilinear(img, y, xx):
        if y < -1.0 or y > h or xx < -1.0 or xx > w:
            return 0.0
        y, xx = max(y, 0.0), max(xx, 0.0)
        yl, xl = int(y), int(xx)
        if yl >= h - 1:
            yh = yl = h - 1
            y = float(yl)
        else:
            yh = yl + 1
        if xl >= w - 1:
            xh = xl = w - 1
            xx = float(xl)
        else:
            xh = xl + 1
        ly, lx = y - yl, xx - xl
        return ((1 - ly) * (1 - lx) * img[:, yl, xl] + (1 - ly) * lx * img[:, yl, xh]
                + ly * (1 - lx) * img[:, yh, xl] + ly * lx * img[:, yh, xh])

    for r, (x1, y1, x2, y2) in enumerate(rois.astype(np.float64) * scale):
        rw, rh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
        gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
        img = x[bidx[r]].astype(np.float64)
        for i in range(ph):
            for j in range(pw):
                acc = np.zeros(c)
                for iy in range(gh):
                    for ix in range(gw):
                        acc += bilinear(img, y1 + i * bh + (iy + 0.5) * bh / gh,
                                        x1 + j * bw + (ix + 0.5) * bw / gw)
                out[r, :, i, j] = acc / max(gh * gw, 1)
    return out
