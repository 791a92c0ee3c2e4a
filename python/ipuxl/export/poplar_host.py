"""The host half of an exported Poplar program, and the IPU model's tile
mappings it is built with.

:func:`mapping_of` reads a Profile's tensor table (``first_tile``,
``tiles``, ``bytes_per_tile`` per tensor, tile sets as the IPU model lays
them out: IO tiles first, then compute tiles, a tensor wrapping within its
set). :func:`host_side` writes ``createDevice`` / ``makeGraph`` and the
stream plumbing ``main()`` uses: weights go in through one host-to-device
FIFO per variable (``weights_from_host/<id>``, PopART's WeightsFromHost
program) and out through one device-to-host FIFO each; each input stream
is fed from its ``(num_host_transfers?, replicas?, *shape)`` array, item
``(transfer % num_host_transfers, replica)`` per transfer, and each output
stream's items are written into an array of that shape, as ``Session.run``
reads and writes its arrays. A variable with several replica groups is
stored ``(groups, *shape)`` as PopXL holds it on the host; each replica
reads its group's row, and the saved weights are the first replica of each
group (every replica for ``retrieval_mode="all_replicas"``), as
``Session.get_tensors_data`` returns them.
"""
from typing import Dict, Tuple

import numpy as np

__all__ = ["mapping_of", "host_side", "replica_groups"]


def replica_groups(t, replicas: int):
    """The host group of each replica for variable ``t`` (a list, index:
    replica), or None when every replica gets the same value (Session's
    rule)."""
    rg = t.replica_grouping
    if rg is None or rg.num_groups <= 1:
        return None
    groups = list(rg.assignment)
    if len(groups) != replicas:
        raise NotImplementedError(f"Poplar export: variable {t.id!r}: its replica grouping covers "
                                  f"{len(groups)} replicas, the program runs {replicas}")
    return groups


def saved_replicas(em, t):
    """The replicas whose value of variable ``t`` is saved, and the saved
    array's shape, as Session.get_tensors_data returns it: the first replica
    of each group, or every replica for an ``all_replicas`` variable of
    groups larger than one."""
    if em.replicas < 2:
        return [0], list(t.shape)
    groups = replica_groups(t, em.replicas)
    rg = t.replica_grouping
    if t.retrieval_mode == "all_replicas" and rg is not None and rg.group_size > 1:
        return list(range(em.replicas)), [em.replicas, *t.shape]
    if groups:
        return [groups.index(g) for g in range(max(groups) + 1)], [max(groups) + 1, *t.shape]
    return [0], list(t.shape)


def mapping_of(profile) -> Tuple[Dict[tuple, tuple], int, int, str]:
    """``({(graph, tensor id): (ipu, set begin, set size, first in set,
    tiles, elements per tile)}, tiles per IPU, IPUs, version)`` of a
    Profile."""
    target = profile.target
    tpi = int(target["tiles_per_ipu"])
    nio = int(target.get("num_io_tiles", 0))
    ipus = int(target.get("num_ipus", 1))
    version = str(target.get("version", target.get("name", "ipu2")))
    t = profile.tensors
    out = {}
    for i, name in enumerate(t["name"]):
        first, count = int(t["first_tile"][i]), int(t["tiles"][i])
        per_bytes, total = int(t["bytes_per_tile"][i]), int(t["bytes"][i])
        if count <= 0 or total <= 0:
            continue
        if nio == 0 or first >= nio:
            base, size = nio, tpi - nio
        else:
            base, size = 0, nio
        out[(str(t["graph"][i]), str(name))] = (int(t["ipu"][i]), base, size, first - base, count,
                                               per_bytes, total)
    return out, tpi, ipus, version


def _elements_mapping(m, itemsize: int):
    ipu, base, size, first, count, per_bytes, total = m
    per = max(1, per_bytes // itemsize)
    return ipu, base, size, first, count, per


def host_side(em, stream_meta, weights) -> str:
    """The C++ of the host functions (see the module docstring)."""
    R = em.replicas
    nht = int(em.ir.num_host_transfers)
    rep = R > 1
    version = em.version if em.version in ("ipu1", "ipu2", "ipu21") else "ipu2"
    lines = [
        "struct HostBuffers {",
        "  std::map<std::string, std::vector<char>> bytes;",
        "};", "",
        "static poplar::Device createDevice() {",
        f"  poplar::IPUModel model({em_cstr(version)});",
        "  model.numIPUs = NUM_IPUS * REPLICATION_FACTOR;",
        "  model.tilesPerIPU = TILES_PER_IPU;",
        "  return model.createDevice();",
        "}", "",
        "static poplar::Graph makeGraph(const poplar::Device &device) {",
        ("  return poplar::Graph(device.getTarget(), poplar::replication_factor(REPLICATION_FACTOR));"
         if rep else "  return poplar::Graph(device.getTarget());"),
        "}", "",
        "static void connectWeights(poplar::Engine &engine,",
        "    const std::map<std::string, ipuxl_export::HostArray> &weights, const std::string &path,",
        "    HostBuffers &buffers) {",
        "  using namespace ipuxl_export;",
    ]
    for t in weights:
        n = int(np.prod(t.shape, dtype=np.int64))
        descr = em_descr(t.dtype)
        key = em_cstr(t.id)
        if rep:
            groups = em.weight_rows.get(id(t))
            total = n * (max(groups) + 1 if groups else 1)
            nbytes = n * t.dtype.itemsize
            lines.append(f"  {{ const HostArray &a = lookup(weights, {key}, {em_cstr(descr)}, {total}, path);")
            if groups:  # replica r reads its group's value: row groups[r] of (groups, *shape)
                lines.append("    static const unsigned group[] = {" + ", ".join(map(str, groups)) + "};")
            offset = f" + group[r] * {nbytes}u" if groups else ""
            lines.append("    for (unsigned r = 0; r < REPLICATION_FACTOR; ++r) {")
            lines.append(f"      engine.connectStream({em_cstr('weights_from_host/' + t.id)}, r, "
                         f"const_cast<char *>(a.data.data()){offset});")
            lines.append(f"      auto &dst = buffers.bytes[std::string({key}) + \"#\" + std::to_string(r)];")
            lines.append(f"      dst.assign({nbytes}u, 0);")
            lines.append(f"      engine.connectStream({em_cstr('weights_to_host/' + t.id)}, r, "
                         "dst.data());")
            lines.append("    } }")
        else:
            lines.append(f"  {{ const HostArray &a = lookup(weights, {key}, {em_cstr(descr)}, {n}, path);")
            lines.append(f"    auto &out = buffers.bytes[{key}]; out.assign(a.data.size(), 0);")
            lines.append(f"    engine.connectStream({em_cstr('weights_from_host/' + t.id)}, "
                         "const_cast<char *>(a.data.data()));")
            lines.append(f"    engine.connectStream({em_cstr('weights_to_host/' + t.id)}, "
                         "out.data()); }")
    lines += ["}", "",
              "static void writeRemote(poplar::Engine &engine,",
              "    const std::map<std::string, ipuxl_export::HostArray> &weights, const std::string &path) {",
              "  using namespace ipuxl_export;", "  (void)engine; (void)weights; (void)path;"]
    for rb, entry, key, t in em.remote_vars:
        n = int(np.prod(t.shape, dtype=np.int64))
        rows = em.weight_rows.get(id(t))
        total = n * (max(rows) + 1 if rows else 1)
        lines.append(f"  {{ const HostArray &a = lookup(weights, {em_cstr(key)}, "
                     f"{em_cstr(em_descr(t.dtype))}, {total}, path);")
        if key in em.remote_shards:
            # each group's row flattened, zero-padded into `shards` shards;
            # member k of the group gets shard k % shards
            size, shards, members = em.remote_shards[key]
            nb, rowb = size * t.dtype.itemsize, n * t.dtype.itemsize
            lines.append(f"    std::vector<char> padded({len(members) * shards * nb}u, 0);")
            for g, mem in enumerate(members):  # the group's value: the stored row of its first member
                src = f"a.data.begin() + {(rows[mem[0]] if rows else 0) * rowb}"
                lines.append(f"    std::copy({src}, {src} + {rowb}, padded.begin() + {g * shards * nb});")
            for g, mem in enumerate(members):
                for k, r in enumerate(mem):
                    lines.append(f"    engine.copyToRemoteBuffer(padded.data() + {(g * shards + k % shards) * nb}u, "
                                 f"{em_cstr(em._rb_name(rb))}, {entry}, {r});")
            lines.append("  }")
            continue
        if rows:  # replica r's entry gets its group's row
            nbytes = n * t.dtype.itemsize
            lines.append("    static const unsigned row[] = {" + ", ".join(map(str, rows)) + "};")
            lines.append(f"    for (unsigned r = 0; r < REPLICATION_FACTOR; ++r) engine.copyToRemoteBuffer("
                         f"a.data.data() + row[r] * {nbytes}u, {em_cstr(em._rb_name(rb))}, {entry}, r); }}")
            continue
        lines.append(f"    for (unsigned r = 0; r < REPLICATION_FACTOR; ++r) engine.copyToRemoteBuffer("
                     f"a.data.data(), {em_cstr(em._rb_name(rb))}, {entry}, r); }}")
    lines += ["}", "",
              "static std::vector<std::pair<std::string, ipuxl_export::HostArray>> savedWeights(",
              "    poplar::Engine &engine, const std::map<std::string, ipuxl_export::HostArray> &weights,",
              "    HostBuffers &buffers) {",
              "  using namespace ipuxl_export;", "  (void)engine;",
              "  std::vector<std::pair<std::string, HostArray>> out;"]
    for t in weights:
        key = em_cstr(t.id)
        if not rep:
            lines.append(f"  {{ HostArray a = weights.at({key}); a.data = "
                         f"buffers.bytes.at({key}); out.emplace_back({key}, a); }}")
            continue
        srcs, shape = saved_replicas(em, t)
        lines.append(f"  {{ HostArray a = weights.at({key}); a.shape = {{"
                     + ", ".join(str(int(d)) for d in shape) + "}; a.data.clear();")
        lines.append("    for (unsigned r : {" + ", ".join(f"{r}u" for r in srcs) + "}) { const auto &b = "
                     f"buffers.bytes.at(std::string({key}) + \"#\" + std::to_string(r)); "
                     "a.data.insert(a.data.end(), b.begin(), b.end()); }")
        lines.append(f"    out.emplace_back({key}, a); }}")
    for rb, entry, key, t in em.remote_vars:
        if key in em.remote_shards:
            # each saved row put together from the shards of one set of
            # members (the first of each group, or each replica's own set)
            size, shards, members = em.remote_shards[key]
            nb, rowb = size * t.dtype.itemsize, int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
            srcs, shape = saved_replicas(em, t)
            lines.append(f"  {{ HostArray a = weights.at({em_cstr(key)}); a.shape = {{"
                         + ", ".join(str(int(d)) for d in shape) + f"}}; a.data.assign({len(srcs) * rowb}u, 0);")
            lines.append(f"    std::vector<char> padded({shards * nb}u);")
            for row, r in enumerate(srcs):
                g = next(gi for gi, mem in enumerate(members) if r in mem)
                rank = members[g].index(r)
                base = rank - rank % shards
                for k in range(shards):
                    lines.append(f"    engine.copyFromRemoteBuffer({em_cstr(em._rb_name(rb))}, padded.data() + "
                                 f"{k * nb}u, {entry}, {members[g][base + k]});")
                lines.append(f"    std::copy(padded.begin(), padded.begin() + {rowb}, a.data.begin() + {row * rowb});")
            lines.append(f"    out.emplace_back({em_cstr(key)}, a); }}")
            continue
        srcs, shape = saved_replicas(em, t)
        nbytes = int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
        lines.append(f"  {{ HostArray a = weights.at({em_cstr(key)}); a.shape = {{"
                     + ", ".join(str(int(d)) for d in shape) + f"}}; a.data.assign({len(srcs) * nbytes}u, 0);")
        for k, r in enumerate(srcs):
            lines.append(f"    engine.copyFromRemoteBuffer({em_cstr(em._rb_name(rb))}, a.data.data() + "
                         f"{k * nbytes}u, {entry}, {r});")
        lines.append(f"    out.emplace_back({em_cstr(key)}, a); }}")
    lines += ["  return out;", "}", "",
              "static void connectStreams(poplar::Engine &engine,",
              "    const std::map<std::string, ipuxl_export::HostArray> &inputs, const std::string &path,",
              "    std::vector<std::pair<std::string, ipuxl_export::HostArray>> &outputs, HostBuffers &buffers) {",
              "  using namespace ipuxl_export;", "  (void)inputs; (void)path; (void)buffers;"]
    lead = ([nht] if nht > 1 else []) + ([R] if R > 1 else [])
    outs = [m for m in stream_meta if not m[1]]
    lines.append(f"  outputs.reserve({len(outs)});")
    for name, h2d, descr, shape in stream_meta:
        if h2d:
            continue
        full = lead + list(shape)
        n = int(np.prod(full, dtype=np.int64))
        item = int(descr[2:])
        lines.append(f"  {{ HostArray a; a.descr = {em_cstr(descr)}; a.shape = {{"
                     + ", ".join(str(d) for d in full) + f"}}; a.data.assign({n * item}, 0); "
                     f"outputs.emplace_back({em_cstr(name)}, a); }}")
    k_out = 0
    for name, h2d, descr, shape in stream_meta:
        n_item = int(np.prod(shape, dtype=np.int64))
        item = n_item * int(descr[2:])
        if h2d:
            total = n_item * max(1, nht) * R
            lines.append(f"  {{ const HostArray &a = lookup(inputs, {em_cstr(name)}, "
                         f"{em_cstr(descr)}, {total}, path.empty() ? std::string(\"--inputs\") : path);")
            lines.append("    const char *base = a.data.data();")
        else:
            lines.append(f"  {{ char *base = outputs[{k_out}].second.data.data();")
            k_out += 1
        lines.append("    for (unsigned r = 0; r < REPLICATION_FACTOR; ++r) {")
        lines.append("      auto count = std::make_shared<std::size_t>(0);")
        copy = ("std::memcpy(p, base + at, item);" if h2d else "std::memcpy(base + at, p, item);")
        lines.append(f"      const std::size_t item = {item};")
        lines.append("      auto cb = [=](void *p) { const std::size_t i = (*count)++ % "
                     "NUM_HOST_TRANSFERS; const std::size_t at = (i * REPLICATION_FACTOR + r) * "
                     f"item; {copy} }};")
        if rep:
            lines.append(f"      engine.connectStreamToCallback({em_cstr(name)}, r, cb);")
        else:
            lines.append(f"      engine.connectStreamToCallback({em_cstr(name)}, cb);")
        lines.append("    } }")
    lines += ["}", ""]
    return "\n".join(lines)


def em_cstr(s: str) -> str:
    from .poplar_emit import cstr

    return cstr(s)


def em_descr(dtype) -> str:
    from .poplar_emit import NPY_DESCR

    return NPY_DESCR[dtype.name]
