"""Static analysis of PopXL's and popxl.addons' test files for
scripts/popxl_conformance.py: which test functions (or whole files) use
non-public interfaces (``_pb_``, ``_internal``, ``popart``, ``test_util``,
``poprun``) and which need replication, remote buffers, MPI or hardware."""
import ast
import re
from pathlib import Path

EXCLUDED_MODULES = ("popart", "test_util")
EXCLUDED_SUBSTRINGS = ("_pb_", "_internal")
EXCLUDED_STRINGS = ("poprun",)

TAG_TOKENS = {
    "remote": re.compile(
        r"remote_buffer|RemoteBuffer|remote_variable|remote_load|remote_store|"
        r"remote_code_load|OffChip|named_buffers|named_variable_buffers|"
        r"load_remote_graph|store_remote_graph|create_remote_buffer|RemoteHandle"),
    "replication": re.compile(r"replica_sharded"),
    "mpi": re.compile(r"popdist|\bmpi|_mpi|mpirun"),
}
TAGS = ("replication", "remote", "mpi", "hw")


# --------------------------------------------------------------------------
# Static analysis: which test functions use non-public interfaces
# --------------------------------------------------------------------------

def _names_in(node):
    """Identifiers (Name ids and attribute names) and string constants in a
    subtree, as two sets."""
    idents, strings = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            idents.add(n.id)
        elif isinstance(n, ast.Attribute):
            idents.add(n.attr)
        elif isinstance(n, ast.arg):
            idents.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            idents.add(n.name)
        elif isinstance(n, ast.alias):
            idents.add(n.name)
            if n.asname:
                idents.add(n.asname)
        elif isinstance(n, ast.ImportFrom) and n.module:
            idents.add(n.module)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            strings.add(n.value)
    return idents, strings


def _attr_chain(node):
    """``a.b.c`` -> ["a", "b", "c"] for a chain of attributes on a Name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _import_time_nodes(stmts):
    """The parts of a statement list that run when the module (or class
    body) executes: everything except function bodies."""
    out = []
    for s in stmts:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.extend(s.decorator_list)
            out.extend(d for d in s.args.defaults + s.args.kw_defaults if d is not None)
            for a in s.args.args + s.args.posonlyargs + s.args.kwonlyargs:
                if a.annotation is not None:
                    out.append(a.annotation)
            if s.returns is not None:
                out.append(s.returns)
        elif isinstance(s, ast.ClassDef):
            out.extend(s.decorator_list)
            out.extend(s.bases)
            out.extend(_import_time_nodes(s.body))
        elif isinstance(s, ast.Try):
            handles_import_error = any(
                h.type is None or "ImportError" in ast.dump(h.type)
                or "ModuleNotFoundError" in ast.dump(h.type) or "Exception" in ast.dump(h.type)
                for h in s.handlers)
            if not handles_import_error:
                out.extend(_import_time_nodes(s.body))
            for h in s.handlers:
                out.extend(_import_time_nodes(h.body))
            out.extend(_import_time_nodes(s.orelse))
            out.extend(_import_time_nodes(s.finalbody))
        elif isinstance(s, ast.If):
            out.append(s.test)
            out.extend(_import_time_nodes(s.body))
            out.extend(_import_time_nodes(s.orelse))
        elif isinstance(s, (ast.With, ast.For, ast.While)):
            out.append(s)
        else:
            out.append(s)
    return out


def _int_above_1(node):
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value > 1


def _sets_literal_replication(tree) -> bool:
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name == "Ir" and n.args and _int_above_1(n.args[0]):
                return True
            if any(k.arg in ("replication", "replication_factor") and _int_above_1(k.value)
                   for k in n.keywords):
                return True
        elif isinstance(n, ast.Assign) and _int_above_1(n.value):
            if any(isinstance(t, ast.Attribute) and t.attr == "replication_factor"
                   for t in n.targets):
                return True
    return False


class ModuleInfo:
    """What one Python file of a suite defines, imports and references."""

    def __init__(self, path: Path, analyser: "Analyser"):
        self.path = path
        self.source = path.read_text()
        self.tree = ast.parse(self.source, str(path))
        self.analyser = analyser
        self.excluded_aliases = {}     # name -> excluded module it is bound to
        self.local_aliases = {}        # name -> (ModuleInfo, attribute or None)
        self.defs = {}                 # name -> ast node defined at top level
        self.fixtures = set()
        self._scan()

    # -- imports --------------------------------------------------------
    def _resolve_local(self, module, level):
        base = self.path.parent
        for _ in range(max(level - 1, 0)):
            base = base.parent
        if not module:
            return None
        cand = base.joinpath(*module.split(".")).with_suffix(".py")
        if cand.is_file():
            return self.analyser.module(cand)
        cand = base.joinpath(*module.split("."), "__init__.py")
        if cand.is_file() and level:
            return self.analyser.module(cand)
        return None

    def _scan_imports(self, node):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                bound = a.asname or top
                if top in EXCLUDED_MODULES:
                    self.excluded_aliases[bound] = a.name
                    continue
                local = self._resolve_local(a.name, 0)
                if local is not None:
                    self.local_aliases[bound] = (local, None)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level == 0 and mod.split(".")[0] in EXCLUDED_MODULES:
                for a in node.names:
                    self.excluded_aliases[a.asname or a.name] = mod
                return
            local = self._resolve_local(mod, node.level)
            if local is not None:
                for a in node.names:
                    if a.name == "*":
                        for name in local.defs:
                            self.local_aliases.setdefault(name, (local, name))
                    else:
                        self.local_aliases[a.asname or a.name] = (local, a.name)

    def _scan(self):
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._scan_imports(node)
        for s in self.tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[s.name] = s
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        "fixture" in ast.dump(d) for d in s.decorator_list):
                    self.fixtures.add(s.name)
            elif isinstance(s, (ast.Assign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.defs[n.id] = s

    # -- import-time blockers ------------------------------------------
    def import_blocker(self, _seen=None):
        """The excluded module this file imports when it is imported (directly
        or through a helper next to it), or None."""
        _seen = _seen or set()
        if self.path in _seen:
            return None
        _seen.add(self.path)
        for node in _import_time_nodes(self.tree.body):
            for n in ast.walk(node):
                if isinstance(n, ast.Import):
                    for a in n.names:
                        if a.name.split(".")[0] in EXCLUDED_MODULES:
                            return a.name
                        local = self._resolve_local(a.name, 0)
                        if local is not None:
                            b = local.import_blocker(_seen)
                            if b:
                                return f"{b} (through {local.path.name})"
                elif isinstance(n, ast.ImportFrom):
                    mod = n.module or ""
                    if n.level == 0 and mod.split(".")[0] in EXCLUDED_MODULES:
                        return mod
                    local = self._resolve_local(mod, n.level)
                    if local is not None:
                        b = local.import_blocker(_seen)
                        if b:
                            return f"{b} (through {local.path.name})"
        return None

    # -- references ----------------------------------------------------
    def direct_violation(self, node):
        """Why ``node`` itself (not what it calls) is non-public, or None."""
        idents, strings = _names_in(node)
        for i in idents:
            for sub in EXCLUDED_SUBSTRINGS:
                if sub in i:
                    return f"uses {sub}"
            if i in self.excluded_aliases:
                mod = self.excluded_aliases[i].split(".")[0]
                return f"uses {mod}"
        for s in strings | idents:
            for tok in EXCLUDED_STRINGS:
                if tok in s:
                    return f"uses {tok}"
        return None

    def references(self, node):
        """(module, name) pairs of top-level definitions ``node`` names."""
        out = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                if n.id in self.defs:
                    out.add((self, n.id))
                elif n.id in self.local_aliases:
                    mod, attr = self.local_aliases[n.id]
                    if attr is not None:
                        if attr in mod.defs:
                            out.add((mod, attr))
                    else:
                        out.add((mod, None))
                elif n.id in self.analyser.conftest_fixtures:
                    out.add(self.analyser.conftest_fixtures[n.id])
            elif isinstance(n, ast.Attribute):
                chain = _attr_chain(n)
                if chain and len(chain) >= 2 and chain[0] in self.local_aliases:
                    mod, attr = self.local_aliases[chain[0]]
                    if attr is None and chain[1] in mod.defs:
                        out.add((mod, chain[1]))
            elif isinstance(n, ast.arg):
                if n.arg in self.fixtures:
                    out.add((self, n.arg))
                elif n.arg in self.analyser.conftest_fixtures:
                    out.add(self.analyser.conftest_fixtures[n.arg])
        return out

    def test_functions(self):
        """[(qualname, function node, [extra nodes it depends on])]."""
        tests = []
        for s in self.tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name.startswith("test"):
                tests.append((s.name, s, []))
            elif isinstance(s, ast.ClassDef) and s.name.startswith("Test"):
                helpers = [b for b in s.body
                           if not (isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))
                                   and b.name.startswith("test"))]
                extra = helpers + s.decorator_list + s.bases
                for b in s.body:
                    if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) and b.name.startswith("test"):
                        tests.append((f"{s.name}::{b.name}", b, extra))
        return tests


class Analyser:
    def __init__(self):
        self._modules = {}
        self.conftest_fixtures = {}

    def module(self, path: Path) -> ModuleInfo:
        path = path.resolve()
        if path not in self._modules:
            self._modules[path] = None  # cycle guard
            self._modules[path] = ModuleInfo(path, self)
        return self._modules[path]

    def load_conftests(self, test_file: Path, root: Path):
        """Fixtures of the conftest.py files from ``root`` down to the file."""
        self.conftest_fixtures = {}
        d = test_file.parent.resolve()
        chain = []
        root = root.resolve()
        while True:
            chain.append(d)
            if d == root or d.parent == d:
                break
            d = d.parent
        for d in reversed(chain):
            c = d / "conftest.py"
            if c.is_file():
                m = self.module(c)
                for f in m.fixtures:
                    self.conftest_fixtures[f] = (m, f)

    def closure_violation(self, mod, nodes):
        """First violation found in ``nodes`` or in anything they reference."""
        seen = set()
        stack = [(mod, n) for n in nodes]
        while stack:
            m, n = stack.pop()
            if m is None:
                continue
            v = m.direct_violation(n)
            if v:
                return v
            for ref in m.references(n):
                if ref in seen:
                    continue
                seen.add(ref)
                rmod, rname = ref
                if rname is None:
                    # ``import helper`` used as ``helper.x``: whole module
                    stack.append((rmod, rmod.tree))
                else:
                    stack.append((rmod, rmod.defs[rname]))
        return None

    def closure_text(self, mod, nodes):
        """Identifiers and strings of ``nodes`` and everything they reference
        (for tags); ``replication`` among them when that code sets a literal
        replication factor above 1 (``Ir(4)``, ``replication=4``,
        ``ir.replication_factor = 4``)."""
        idents, strings = set(), set()
        seen = set()
        stack = [(mod, n) for n in nodes]
        while stack:
            m, n = stack.pop()
            i, s = _names_in(n)
            idents |= i
            strings |= s
            if _sets_literal_replication(n):
                idents.add("replica_sharded")   # the replication tag's token
            for ref in m.references(n):
                if ref in seen:
                    continue
                seen.add(ref)
                rmod, rname = ref
                stack.append((rmod, rmod.tree if rname is None else rmod.defs[rname]))
        return " ".join(sorted(idents)) + " " + " ".join(sorted(strings))


def _literal_len(mod, node):
    """Length of a parametrize argvalues node when it is a literal list or
    tuple, a module-level name bound to one, or ``range(<int>)``; else None."""
    if isinstance(node, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        return len(node.elts)
    if isinstance(node, ast.Name) and isinstance(mod.defs.get(node.id), ast.Assign):
        return _literal_len(mod, mod.defs[node.id].value)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "range" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
        return int(node.args[0].value)
    return None


def estimated_items(mod, decorators) -> int:
    """How many test items pytest would make of a function, from its (and
    its class's) literal ``pytest.mark.parametrize`` decorators; 1 per
    decorator whose values are not literal. Used only for files pytest
    cannot collect, so that they weigh what they would when collected."""
    n = 1
    for d in decorators:
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) \
                and d.func.attr == "parametrize" and len(d.args) >= 2:
            k = _literal_len(mod, d.args[1])
            n *= k if k else 1
    return n


def cmake_hw_only(test_file: Path):
    """True when popart's CMakeLists registers the file only for Hw, or
    marks it DISABLED."""
    cm = test_file.parent / "CMakeLists.txt"
    if not cm.is_file():
        return False
    text = cm.read_text()
    stem = test_file.stem
    m = re.search(r"add_popart_py_unit_test\(\s*" + re.escape(stem) + r"\b([^)]*)\)", text, re.S)
    if not m:
        return False
    args = m.group(1)
    if re.search(r"DISABLED\s+TRUE", args):
        return True
    v = re.search(r"VARIANTS\s+((?:\w+\s*)+?)(?:LABELS|PROPERTIES|MATCHEXPR|$)", args + " ")
    if v:
        variants = v.group(1).split()
        return variants == ["Hw"]
    return False


def analyse_file(analyser, test_file: Path, root: Path):
    """Static facts about one test file: per function, excluded (with the
    reason) and static tags."""
    analyser.load_conftests(test_file, root)
    try:
        mod = analyser.module(test_file)
    except SyntaxError as e:
        return {"error": f"SyntaxError: {e}", "functions": {}}
    blocker = mod.import_blocker()
    hw = cmake_hw_only(test_file)
    pytestmark = [mod.defs["pytestmark"]] if "pytestmark" in mod.defs else []
    functions = {}
    for qual, fn, extra in mod.test_functions():
        deps = [fn] + extra + pytestmark
        violation = analyser.closure_violation(mod, deps)
        text = analyser.closure_text(mod, deps)
        tags = sorted(t for t, rx in TAG_TOKENS.items() if rx.search(text))
        if "Ir(replication=\"popdist\")" in text or "'popdist'" in text:
            tags = sorted(set(tags) | {"mpi"})
        if hw:
            tags = sorted(set(tags) | {"hw"})
        reason = None
        if blocker:
            reason = f"file imports {blocker}"
            if violation:
                reason += f"; {violation}"
        elif violation:
            reason = violation
        decorators = list(fn.decorator_list) + [d for e in extra if isinstance(e, ast.expr)
                                                for d in [e]]
        functions[qual] = {"excluded": reason, "public_in_body": violation is None,
                           "estimated_items": estimated_items(mod, decorators),
                           "tags": tags}
    serial = "mark.serial" in mod.source
    return {"import_blocker": blocker, "functions": functions, "serial": serial}
