"""Checkpoints: a Session's variables (weights and optimizer state) saved to
and loaded from one file, atomically.

Format (version 2): a NumPy ``.npz`` archive (``numpy.load`` reads it) whose
entries are positional (``arr_0``, ``arr_1``, ...) plus
``__ipuxl_checkpoint__``: a JSON document (as a uint8 array) with the format
version and, per tensor in order, its name, entry, popxl dtype and shape.
Names live only in that index, so any name round-trips, whatever it is
(``file`` and ``allow_pickle``, ``np.savez``'s own parameters, included).
Names are the variables' tensor ids (stable for a program built the same
way), or the dotted names of an addons ``NamedTensors`` tree. Version 1
files (one entry per name) are still read.

Saving writes a temporary file in the target's directory, flushes it to the
disk, then renames it over the target (``os.replace``, atomic on POSIX and
Windows): a process killed at any moment leaves either the previous
checkpoint or the new one, never a torn file.
"""
import json
import os
import tempfile
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from . import dtypes
from .tensor import Variable

__all__ = ["save_checkpoint", "load_checkpoint", "CheckpointMismatch", "FORMAT_VERSION"]

FORMAT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_META = "__ipuxl_checkpoint__"


class CheckpointMismatch(ValueError):
    """A checkpoint's names, shapes or dtypes differ from the variables it is
    loaded into; the message lists every difference."""


TensorsArg = Union[None, Mapping[str, Variable], object]


def _named_variables(session, tensors: TensorsArg) -> Dict[str, Variable]:
    if tensors is None:
        return {v.id: v for v in session._prog.variables + session._prog.remote_variables}
    named = getattr(tensors, "named_tensors", None)  # an addons NamedTensors tree
    if named is not None and not isinstance(tensors, Mapping):
        tensors = dict(named)
    if isinstance(tensors, Mapping):
        out = dict(tensors)
    else:
        out = {t.id: t for t in tensors}
    for name, v in out.items():
        if not isinstance(name, str):
            raise TypeError(f"checkpoint: names must be str, got {name!r} for "
                            f"{getattr(v, 'id', v)!r}")
        if not isinstance(v, Variable):
            raise TypeError(f"checkpoint: {name!r} is a {type(v).__name__}, not a Variable")
        if v.ir is not session.ir:
            raise ValueError(f"checkpoint: variable {name!r} belongs to another Ir")
    return out


def save_checkpoint(session, path: Union[str, os.PathLike], tensors: TensorsArg = None) -> None:
    """Write the current values of the Session's variables (all of them, or
    ``tensors``: Variables, ``{name: Variable}`` or a ``NamedTensors`` tree)
    to ``path``, atomically (see the module docstring)."""
    named = _named_variables(session, tensors)
    if session.ir.replication_factor > 1:
        for name, v in sorted(named.items()):
            rg = v.replica_grouping
            if v.retrieval_mode == "all_replicas" and rg is not None and rg.group_size > 1:
                raise NotImplementedError(
                    f"checkpoint: variable {name!r} has retrieval_mode 'all_replicas' (one value "
                    "per replica), which a checkpoint cannot write back (PopXL's "
                    "write_variable_data does not support it); leave it out with `tensors`")
    # With share_host_weights the host arrays are the device storage: after
    # a run failed part-way they hold a half-applied step.
    session._assert_host_values_defined("save_checkpoint", named.values())
    values = session.get_tensors_data(list(named.values()))
    arrays = []
    meta = {"format": "ipuxl-checkpoint", "version": FORMAT_VERSION, "tensors": []}
    for k, (name, v) in enumerate(sorted(named.items())):
        arrays.append(np.asarray(values[v], order="C"))  # (ascontiguousarray makes 0-d 1-d)
        meta["tensors"].append({"name": name, "entry": f"arr_{k}", "dtype": v.dtype.name,
                                "shape": list(v.shape_on_host)})
    index = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, *arrays, **{_META: index})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def read_checkpoint(path: Union[str, os.PathLike]) -> Dict[str, np.ndarray]:
    """The arrays of a checkpoint file, by name, checked against its metadata.
    A file that is not a readable checkpoint (not an archive, a single
    ``.npy`` array, truncated, holding pickled objects, with malformed
    metadata) raises ValueError naming the file."""
    import zipfile

    try:
        return _read_checkpoint(path)
    except (zipfile.BadZipFile, EOFError, KeyError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"checkpoint {os.fspath(path)!r}: not a readable ipuxl checkpoint "
                         f"({type(e).__name__}: {e})") from None
    except ValueError as e:
        if str(e).startswith("checkpoint "):
            raise
        raise ValueError(f"checkpoint {os.fspath(path)!r}: not a readable ipuxl checkpoint "
                         f"({e})") from None


def _index(meta, files, where: str) -> List[Tuple[str, str, dict]]:
    """(name, archive entry, {dtype, shape}) of each tensor the metadata
    lists, after checking its structure (any deviation: ValueError)."""
    def bad(what):
        return ValueError(f"{where}: malformed metadata ({what})")

    if not isinstance(meta, dict):
        raise bad(f"a JSON {type(meta).__name__}, not an object")
    if meta.get("format") != "ipuxl-checkpoint" or meta.get("version") not in _READABLE_VERSIONS:
        raise ValueError(f"{where}: unsupported format {meta.get('format')!r} version "
                         f"{meta.get('version')!r}")
    tensors = meta.get("tensors")
    if meta["version"] == 1:  # one entry per name, a {name: info} object
        if not isinstance(tensors, dict):
            raise bad("'tensors' is not an object")
        items = [(name, name, info) for name, info in tensors.items()]
    else:
        if not isinstance(tensors, list):
            raise bad("'tensors' is not a list")
        items = []
        for k, t in enumerate(tensors):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str) or \
                    not isinstance(t.get("entry"), str):
                raise bad(f"tensor {k} has no name and entry")
            items.append((t["name"], t["entry"], t))
    seen = set()
    for name, entry, info in items:
        if name in seen:
            raise bad(f"the name {name!r} appears twice")
        seen.add(name)
        if entry not in files:
            raise bad(f"tensor {name!r}: no entry {entry!r} in the archive")
        if not isinstance(info, dict) or not isinstance(info.get("dtype"), str) or \
                not isinstance(info.get("shape"), list) or \
                not all(type(d) is int and d >= 0 for d in info["shape"]):
            raise bad(f"tensor {name!r}: needs a dtype name and a shape (a list of sizes)")
        try:
            dtypes.dtype.from_name(info["dtype"])
        except (KeyError, ValueError):
            raise bad(f"tensor {name!r}: unknown dtype {info['dtype']!r}") from None
    return items


def _read_checkpoint(path) -> Dict[str, np.ndarray]:
    where = f"checkpoint {os.fspath(path)!r}"
    loaded = np.load(os.fspath(path), allow_pickle=False)
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"{where}: not an ipuxl checkpoint (a single .npy array, not an .npz "
                         "archive)")
    with loaded as z:
        if _META not in z.files:
            raise ValueError(f"{where}: not an ipuxl checkpoint (no {_META} entry)")
        meta = json.loads(bytes(z[_META]).decode())
        out = {}
        for name, entry, info in _index(meta, set(z.files), where):
            a = z[entry]
            want = dtypes.dtype.from_name(info["dtype"]).as_numpy()
            if a.dtype != want or list(a.shape) != info["shape"]:
                raise ValueError(f"{where}: entry {name!r} is {a.dtype}{a.shape}, its metadata "
                                 f"says {info['dtype']}{tuple(info['shape'])}")
            out[name] = a
        return out


def load_checkpoint(session, path: Union[str, os.PathLike], tensors: TensorsArg = None,
                    strict: bool = True) -> None:
    """Set the Session's variables (all, or ``tensors``) from a checkpoint
    written by :func:`save_checkpoint`. Every name, shape and dtype is checked
    first; with ``strict`` a variable missing from the checkpoint or an entry
    with no variable is an error too. Nothing is written unless all match."""
    named = _named_variables(session, tensors)
    data = read_checkpoint(path)
    problems = []
    for name, v in sorted(named.items()):
        if name not in data:
            if strict:
                problems.append(f"variable {name!r} is not in the checkpoint")
            continue
        a = data[name]
        want = v.dtype.as_numpy()
        if a.dtype != want:
            problems.append(f"{name!r}: checkpoint has dtype {a.dtype}, variable has {want}")
        if tuple(a.shape) != tuple(v.shape_on_host):
            problems.append(f"{name!r}: checkpoint has shape {a.shape}, variable has "
                            f"{tuple(v.shape_on_host)}")
    if strict:
        for name in sorted(set(data) - set(named)):
            problems.append(f"checkpoint entry {name!r} matches no variable")
    if problems:
        raise CheckpointMismatch(f"load_checkpoint({os.fspath(path)!r}): "
                                 + "; ".join(problems))
    session.write_variables_data({v: data[name] for name, v in named.items() if name in data})
