"""BERT-Large SQuAD inference on one IPU, written with the public PopXL API.

The program graphcore/popliner profiled for ``tests/test_popart_bert_inf.py``
(its ``tests/popart-bert-inf/README.md``: graphcore/examples
``nlp/bert/popart``, ``configs/squad_large_128_inf.json``): 24 encoder
layers, hidden 1024, 16 heads, FF 4096, sequence 128, micro batch 1, fp16,
every layer inlined on one IPU with its weights on chip, half partials.
PopART's BERT embeds words with a gather from a 30400-row table
(``vocab_length`` 30400) and positions and segments with a one-hot matmul,
normalises with LayerNorm (PopART's GroupNormalization), masks the
attention scores with the input mask and ends in the SQuAD head, a
1024 -> 2 projection split into start and end logits.

Only the program's structure matters to the IPU model (``profile_ir`` runs
nothing), so every weight is one broadcast zero (``np.broadcast_to``): the
variables cost no host memory beyond what the core keeps.
"""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops

CONFIG = dict(layers=24, hidden=1024, heads=16, ff=4096, seq=128, batch=1, vocab=30400,
              positions=512, segments=2)


def _var(shape, name, dtype=np.float16):
    return popxl.variable(np.broadcast_to(np.zeros((), dtype), shape), name=name)


def _mm(a, b):
    # enable_half_partials in the PopART configuration.
    return ops.matmul(a, b, partials_type=popxl.float16)


def _dense(x, n_in, n_out, name):
    with popxl.name_scope(name):
        return _mm(x, _var((n_in, n_out), "weight")) + _var((n_out,), "bias")


def _layer_norm(x, hidden, name):
    with popxl.name_scope(name):
        return ops.layer_norm(x, _var((hidden,), "gamma"), _var((hidden,), "beta"))


def _attention(x, mask, c):
    b, s, h, nh = c["batch"], c["seq"], c["hidden"], c["heads"]
    hd = h // nh
    qkv = _dense(x, h, 3 * h, "QKV")                       # [b*s, 3h]
    q, k, v = ops.split(qkv, 3, axis=1)

    def heads(t):                                          # [b, nh, s, hd]
        return ops.transpose(ops.reshape(t, (b, s, nh, hd)), (0, 2, 1, 3))

    q, k, v = heads(q), heads(k), heads(v)
    with popxl.name_scope("Z"):
        z = _mm(q, ops.transpose(k, (0, 1, 3, 2))) * (1.0 / np.sqrt(hd)).astype(np.float16)
        z = ops.softmax(z + mask, axis=3)
        z = _mm(z, v)                                         # [b, nh, s, hd]
    z = ops.reshape(ops.transpose(z, (0, 2, 1, 3)), (b * s, h))
    return _dense(z, h, h, "Out")


def _encoder_layer(x, mask, i, c):
    h = c["hidden"]
    with popxl.name_scope(f"Layer{i}"):
        with popxl.name_scope("Attention"):
            x = _layer_norm(x + _attention(x, mask, c), h, "Norm")
        with popxl.name_scope("FF"):
            f = ops.gelu(_dense(x, h, c["ff"], "1"))
            x = _layer_norm(x + _dense(f, c["ff"], h, "2"), h, "Norm")
    return x


def bert_large_squad_ir(**overrides) -> popxl.Ir:
    """The inference program; ``overrides`` change ``CONFIG`` entries
    (``seq=384`` for the PopXL application's sequence length)."""
    c = dict(CONFIG, **overrides)
    b, s, h = c["batch"], c["seq"], c["hidden"]
    ir = popxl.Ir()
    with ir.main_graph:
        ids_s = popxl.h2d_stream((b * s,), popxl.uint32, name="indices")
        pos_s = popxl.h2d_stream((b * s,), popxl.uint32, name="positions")
        seg_s = popxl.h2d_stream((b * s,), popxl.uint32, name="segments")
        mask_s = popxl.h2d_stream((b, 1, 1, s), popxl.float16, name="input_mask")
        ids, pos, seg = ops.host_load(ids_s), ops.host_load(pos_s), ops.host_load(seg_s)
        mask = ops.host_load(mask_s)
        with popxl.name_scope("Embedding"):
            words = ops.gather(_var((c["vocab"], h), "Embedding_Dict"), ids)
            off_on = popxl.constant(np.array([0, 1], np.float16), name="off_on")
            n_pos = popxl.constant(np.array(c["positions"], np.int32), name="n_positions")
            n_seg = popxl.constant(np.array(c["segments"], np.int32), name="n_segments")
            pos_e = _mm(ops.onehot(pos, n_pos, off_on, axis=1), _var((c["positions"], h), "Positional_Dict"))
            seg_e = _mm(ops.onehot(seg, n_seg, off_on, axis=1), _var((c["segments"], h), "Segment_Dict"))
            x = _layer_norm(words + pos_e + seg_e, h, "Norm")
        for i in range(c["layers"]):
            x = _encoder_layer(x, mask, i, c)
        with popxl.name_scope("Squad"):
            logits = _dense(x, h, 2, "SquadW")
            start, end = ops.split(logits, 2, axis=1)
        for t, name in ((start, "start_logits"), (end, "end_logits")):
            out = popxl.d2h_stream(t.shape, t.dtype, name=name)
            ops.host_store(out, t)
    return ir
