"""``position(owner, attr, item)``: where ``item`` is in the list
``owner.<attr>`` (``list.index`` semantics: the first equal element, or -1),
in O(1).

Graph inputs and outputs and op outputs are lists that passes look up by
tensor over and over (placement inference, call-site info); a linear
``t in lst`` / ``lst.index(t)`` per look-up made those passes quadratic in
the number of inputs. The map from element to first index is cached on the
owner: extended when the list only grew at its end (autodiff appends one
input at a time), rebuilt when it was replaced, shrank, changed before its
end, or a hit no longer names the same object. (Replacing an element in
place, keeping the length, is the one edit a miss cannot see; code that does
so must replace the list instead, as every pass here does.)
"""

__all__ = ["position"]


def position(owner, attr: str, item) -> int:
    lst = getattr(owner, attr)
    n = len(lst)
    maps = owner.__dict__.get("_position_maps")
    if maps is None:
        maps = owner._position_maps = {}
    cached = maps.get(attr)
    if cached is not None and cached[0] is lst and cached[1] <= n and \
            (cached[1] == 0 or lst[cached[1] - 1] is cached[2]):
        index = cached[3]
        start = cached[1]
        if start == n:
            k = index.get(item, -1)
            if k < 0 or lst[k] is item:
                return k
            index, start = {}, 0  # an element was replaced: rebuild
    else:
        index, start = {}, 0
    for k in range(start, n):
        x = lst[k]
        if x is not None and x not in index:
            index[x] = k
    maps[attr] = (lst, n, lst[n - 1] if n else None, index)
    return index.get(item, -1)
