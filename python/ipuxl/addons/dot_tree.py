"""``DotTree``: a nested, ordered container addressed by dotted names.

Mirrors ``popxl_addons.dot_tree``. A tree maps keys to leaves or to nested
trees of the same class; ``tree.insert("fc1.weight", w)`` creates the nested
tree ``fc1`` on the fly, ``tree.fc1.weight`` / ``tree["fc1.weight"]`` reads it.

Three orderings are part of the contract (code written for popxl_addons
relies on each):

* ``to_dict`` / ``keys_flat`` / ``values_flat``: insertion order;
* ``unpack``: sorted by flat key;
* ``NamedTensors.tensors``: sorted by tensor name (see ``named_tensors``).

Keys are Python identifiers or non-negative integers (stored as strings).
"""
import re
from collections import OrderedDict
from typing import Callable, Dict, Generic, Iterable, List, Tuple, Type, TypeVar, Union

__all__ = ["DotTree", "sanitise", "to_mapping"]

L = TypeVar("L")
K = TypeVar("K")
V = TypeVar("V")
CLS = TypeVar("CLS", bound="DotTree")


def sanitise(name: str) -> str:
    """Turn ``name`` into a Python identifier: every non-word character
    becomes ``_`` and a leading digit gets a ``_`` in front."""
    return re.sub(r"\W|^(?=\d)", "_", name)


def to_mapping(key: "DotTree[K]", value: "DotTree[V]") -> Dict[K, V]:
    """``{key leaf: value leaf}`` for every flat key present in both trees.

    Keys present in only one tree are ignored (popxl_addons semantics: binding
    is by key intersection, never an error)."""
    kd = key.to_dict()
    vd = value.to_dict()
    return {kd[k]: vd[k] for k in kd if k in vd}


def _is_numeric(key: str) -> bool:
    return key.isdigit()


class DotTree(Generic[L]):
    """Generic tree container with dot access.

    .. code-block:: python

        tree = NamedTensors(weight=w)
        tree.insert("fc1.bias", b)
        tree.fc1.bias is b
        tree.to_dict()        # {'weight': w, 'fc1.bias': b}

    Integer keys are allowed and read with ``[]``: ``tree.insert(0, x);
    tree[0]``. A negative integer counts back from the largest numeric key.
    """

    def __init__(self, **kwargs: "Union[L, DotTree[L]]"):
        object.__setattr__(self, "_map", OrderedDict())
        for k, v in kwargs.items():
            self.insert(k, v)

    # ---- access
    def __getattr__(self, key: str):
        # Only reached when normal attribute lookup failed: real attributes and
        # methods win over keys of the same name.
        if key.startswith("__") or "_map" not in self.__dict__:
            raise AttributeError(key)
        try:
            return self.get(key)
        except KeyError:
            pass
        keys = ", ".join(self._map.keys())
        raise AttributeError(f"{type(self).__name__} has no attribute or key {key!r}. "
                             f"Available keys: [{keys}]")

    def __getitem__(self, key: Union[str, int]):
        return self.get(key)

    def __contains__(self, key: Union[str, int]) -> bool:
        try:
            self.get(key)
        except (KeyError, ValueError):
            return False
        return True

    def get(self, key: Union[str, int]):
        """The value (leaf or nested tree) at ``key``.

        ``key`` may be dotted (``"fc1.weight"``) or numeric. A negative int
        counts back from the largest numeric key (keys {0, 1, 3}: ``-1`` is 3,
        ``-3`` is 1 and ``-2`` raises KeyError).

        Raises:
            KeyError: the key does not exist (the message lists the keys).
        """
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise KeyError(f"DotTree keys are str or int, got {type(key).__name__}")
        if isinstance(key, str) and "." in key:
            head, rest = key.split(".", 1)
            node = self.get(head)
            if not isinstance(node, DotTree):
                raise KeyError(f"Key {head!r} is a leaf, cannot look up {rest!r} in it")
            return node.get(rest)
        available = ", ".join(self._map.keys())
        if isinstance(key, int) or _is_numeric(key):
            k = int(key)
            if k < 0:
                numeric = [int(x) for x in self._map if _is_numeric(x)]
                if not numeric:
                    raise KeyError(f"Negative numerical key {k} but there are no numerical keys. "
                                   f"Available keys: [{available}]")
                top = max(numeric)
                pos = top + 1 + k
                if pos < 0 or str(pos) not in self._map:
                    raise KeyError(f"Negative numerical key does not exist: {k} (largest numerical "
                                   f"key {top}, equivalent key {pos}). Available keys: [{available}]")
                k = pos
            if str(k) not in self._map:
                raise KeyError(f"Numerical key does not exist: {k}. Available keys: [{available}]")
            return self._map[str(k)]
        if key in self._map:
            return self._map[key]
        raise KeyError(f"Key does not exist: {key!r}. Available keys: [{available}]")

    # ---- mutation
    def _validate_key(self, key: str, overwrite: bool) -> None:
        if not (_is_numeric(key) or key.isidentifier()):
            raise ValueError(f"{key!r} is not a valid key: keys must be Python identifiers or "
                             "non-negative integers")
        if not overwrite and key in self._map:
            raise ValueError(f"{key!r} already exists in {type(self).__name__} "
                             "(pass overwrite=True to replace it)")

    def insert(self, key: Union[str, int], value, overwrite: bool = False) -> None:
        """Insert ``value`` at ``key``.

        A dotted key creates nested trees of this class. As in popxl_addons,
        every part of the key that already exists is a clash unless
        ``overwrite=True``: then an existing nested tree is extended (merged),
        a leaf is replaced, and a nested tree receiving a tree is merged key
        by key. (``from_dict`` builds trees from dotted keys that share
        prefixes without needing ``overwrite``.)

        Raises:
            ValueError: negative int key, invalid key, or existing key without
                ``overwrite`` (nothing is modified on failure).
        """
        if isinstance(key, bool):
            raise ValueError(f"DotTree key must be a str or int, got {key!r}")
        if isinstance(key, int):
            if key < 0:
                raise ValueError(f"Numerical key cannot be negative: {key}")
            key = str(key)
        if not isinstance(key, str):
            raise ValueError(f"DotTree key must be a str or int, got {type(key).__name__}")
        head, *rest = key.split(".")
        if not rest:
            self._validate_key(head, overwrite)
            existing = self._map.get(head)
            if overwrite and isinstance(existing, DotTree) and isinstance(value, DotTree):
                merged = existing.copy()
                merged.update(value, overwrite=True)
                self._map[head] = merged
            else:
                self._map[head] = value
            return
        # Nested: as popxl_addons, the head is validated like a leaf key, so an
        # existing head (nested tree or leaf) is a clash unless ``overwrite``,
        # in which case a nested tree is extended and a leaf replaced. Work on
        # a copy so a failing insert leaves this tree untouched.
        self._validate_key(head, overwrite)
        existing = self._map.get(head)
        nested = existing.copy() if isinstance(existing, type(self)) else type(self)()
        nested.insert(".".join(rest), value, overwrite)
        self._map[head] = nested

    def update(self, values: "DotTree[L]", overwrite: bool = False) -> None:
        """Insert every top-level item of (a copy of) ``values``."""
        if not isinstance(values, DotTree):
            raise TypeError(f"update expects a DotTree, got {type(values).__name__}")
        for k, v in values.copy()._map.items():
            self.insert(k, v, overwrite)

    def pop(self, key: Union[str, int]):
        """Remove and return the value at ``key`` (dotted keys allowed)."""
        if isinstance(key, int):
            key = str(key)
        if "." in key:
            head, rest = key.rsplit(".", 1)
            node = self.get(head)
            if not isinstance(node, DotTree):
                raise KeyError(f"{head!r} is a leaf")
            return node.pop(rest)
        if key not in self._map:
            raise KeyError(f"Key does not exist: {key!r}. Available keys: "
                           f"[{', '.join(self._map.keys())}]")
        return self._map.pop(key)

    def copy(self: CLS) -> CLS:
        """Copy of the structure: nested trees are copied, leaves shared."""
        tree = type(self)()
        for k, v in self._map.items():
            tree._map[k] = v.copy() if isinstance(v, DotTree) else v
        return tree

    def filter_keys(self: CLS, keys: Iterable[Union[str, int]]) -> CLS:
        """A new tree holding only the flat ``keys`` (in the order given).

        Raises:
            ValueError: a key is listed twice.
            KeyError: a key does not exist.
        """
        keys = [str(k) for k in keys]
        dups = sorted({k for k in keys if keys.count(k) > 1})
        if dups:
            raise ValueError(f"filter_keys: duplicate keys {dups}")
        tree = type(self)()
        for k in keys:
            tree.insert(k, self.get(k), overwrite=True)
        return tree

    def _clear(self) -> None:
        """Remove every leaf, recursively, keeping the (now empty) nested trees
        themselves. Modules share nested trees with their submodules and rely
        on this to reset both at once."""
        for k, v in list(self._map.items()):
            if isinstance(v, DotTree):
                v._clear()
            else:
                del self._map[k]

    # ---- views
    def keys(self) -> List[str]:
        return list(self._map.keys())

    def values(self) -> list:
        return list(self._map.values())

    def keys_flat(self) -> List[str]:
        return list(self.to_dict().keys())

    def values_flat(self) -> list:
        return list(self.to_dict().values())

    def len(self) -> int:
        return len(self._map)

    def len_flat(self) -> int:
        return len(self.to_dict())

    def to_dict(self) -> "OrderedDict[str, L]":
        """Flat ``{"a.b.c": leaf}`` in insertion order."""
        out = OrderedDict()
        for k, v in self._map.items():
            if isinstance(v, DotTree):
                for sub, leaf in v.to_dict().items():
                    out[f"{k}.{sub}"] = leaf
            else:
                out[k] = v
        return out

    def to_mapping(self, values: "DotTree[V]") -> Dict[L, V]:
        """``{self leaf: values leaf}`` for the common flat keys."""
        return to_mapping(self, values)

    @classmethod
    def from_dict(cls: Type[CLS], d: Dict[Union[str, int], L]) -> CLS:
        """Build a tree from a flat dict; dotted keys become nesting."""
        tree = cls()
        for k, v in d.items():
            node, *path = [tree] + str(k).split(".")
            *heads, leaf = path
            for h in heads:  # descend, creating nested trees (merging is not a clash here)
                if h not in node._map:
                    node.insert(h, cls())
                node = node._map[h]
                if not isinstance(node, DotTree):
                    raise ValueError(f"{k!r}: {h!r} is a leaf, not a nested tree")
            node.insert(leaf, v)
        return tree

    def unpack(self) -> Tuple[Tuple[str, ...], Tuple[L, ...]]:
        """``(keys, values)`` of the flat dict, sorted by key."""
        flat = self.to_dict()
        if not flat:
            return [], []
        items = sorted(flat.items(), key=lambda kv: kv[0])
        return tuple(k for k, _ in items), tuple(v for _, v in items)

    @classmethod
    def pack(cls: Type[CLS], keys: Iterable[Union[str, int]], values: Iterable[L]) -> CLS:
        """Inverse of ``unpack``: ``from_dict(dict(zip(keys, values)))``."""
        return cls.from_dict(dict(zip(keys, values)))

    def map(self: CLS, fn: Callable[[L], V]) -> CLS:
        """A new tree of this class with ``fn`` applied to every leaf."""
        return type(self).from_dict({k: fn(v) for k, v in self.to_dict().items()})

    def __repr__(self) -> str:
        try:
            body = "".join(f"{k}: {v!r},\n" for k, v in self.to_dict().items())
            return f"{type(self).__name__}({{\n{body}}})"
        except Exception:  # noqa: BLE001 - a repr must never raise
            return object.__repr__(self)

    # Pickle/copy support: __getattr__ must not be consulted for _map.
    def __getstate__(self):
        return {"_map": self._map}

    def __setstate__(self, state):
        object.__setattr__(self, "_map", state["_map"])
