"""PopXL behaviours Graphcore's applications rely on, against PopXL's
source (python/popxl/python_files/tensor.py) and popxl-addons'
(popxl_addons/utils.py)."""
import numpy as np
import pytest

import ipuxl as popxl
from ipuxl.addons.utils import OrderedDict


def test_tensor_truth_value_is_its_length_as_in_popxl():
    # PopXL's Tensor has no __bool__ but a __len__: a non-scalar tensor is
    # truthy (GPT-3's ``if not word_embedding:`` tests one for presence) and
    # a scalar's truth value raises ValueError, as its len() does.
    with popxl.Ir().main_graph:
        w = popxl.variable(np.ones((4, 3), np.float32), name="w")
        s = popxl.variable(np.float32(1), name="s")
        assert bool(w) and not (not w) and len(w) == 4
        assert (w or None) is w
        with pytest.raises(ValueError, match="len\\(\\) of a scalar tensor 's'"):
            bool(s)


def test_addons_ordered_dict_idx_is_the_value_at_a_position():
    d = OrderedDict([("a", 10), ("b", 20), ("c", 30)])
    assert d.idx(0) == 10 and d.idx(2) == 30 and d.idx(-1) == 30
    with pytest.raises(IndexError, match="position 3 is out of range for 3 items"):
        d.idx(3)
