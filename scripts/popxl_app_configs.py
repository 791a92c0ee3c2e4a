#!/usr/bin/env python3
"""Size every release configuration of Graphcore's PopXL applications on
the IPU model, without their weights.

    python3 scripts/popxl_app_configs.py --examples PATH [--examples-utils PATH] \\
        [--apps bert,gpt_j,t5,gpt3_2.7B] [--config NAME] [--cache DIR] [--json FILE]

For each configuration in the four applications' ``config/*.yml``
(``release`` or ``phased`` sections, training and inference) a fresh
process builds the application's program through its own entry point
(``finetuning(config)``, ``inference(config)``, ``pretraining_phased``...,
with the config its own ``*_config_setup`` reads from the yml) under the
``popxl`` -> ipuxl alias, as an abstract build (:mod:`ipuxl._abstract`):
variables have shapes and dtypes but no host data, and popxl-addons'
variable factories produce none. The Session the application creates is
modelled on an IPU2 (``ipu_hw`` falls back to the IPU model; out of memory
is reported, not raised) and never run. The table gives per configuration
the IPUs (per replica x replicas), the peak tile memory as a share of the
tile's 624 KiB, the Streaming Memory per replica, whether it fits, and the
build's seconds and peak host memory (the child's maximum RSS).

A configuration whose name ends in ``_podN`` was released for a POD of N
IPUs; the ``pod`` column says whether the IPUs it uses match.

The applications' requirements come from the package cache that
``popxl_apps.py`` fills (the same ``--cache``; it is filled here when
missing, from PyPI).
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import popxl_apps  # noqa: E402  (export, requirements, the Python 3.10 dataclass rule)

#: config file -> (module, function building the program, keyword arguments)
ENTRY_POINTS = {
    "bert": {"pretraining.yml": ("pretraining", "pretraining_phased", {}),
             "squad_training.yml": ("squad_training", "squad_training_phased", {}),
             "squad_inference.yml": ("squad_inference", "squad_inference_phased", {})},
    "gpt_j": {"finetuning.yml": ("finetuning", "finetuning", {}),
              "inference.yml": ("inference", "inference", {})},
    "t5": {"finetuning.yml": ("finetuning", "finetuning", {}),
           "inference.yml": ("inference", "inference", {})},
    "gpt3_2.7B": {"pretraining.yml": ("pretraining", "pretraining", {}),
                  "mnli_finetuning.yml": ("mnli_finetuning", "mnli_finetuning", {}),
                  "inference.yml": ("generative_inference", "generative_inference", {})},
}
SETUP = {"bert": "bert_config_setup", "gpt_j": "gptj_config_setup", "t5": "t5_config_setup",
         "gpt3_2.7B": "gpt_config_setup"}
SECTIONS = ("release", "phased")
TILE_BYTES = 624 * 1024


def release_configs(app_root: Path):
    """[(yml name, section, config name)] of one app, in file order."""
    import yaml

    out = []
    for yml in sorted((app_root / "config").glob("*.yml")):
        data = yaml.safe_load(yml.read_text())
        for sec in SECTIONS:
            for name in (data or {}).get(sec, {}) or {}:
                out.append((yml.name, sec, name))
    return out


# --------------------------------------------------------------------------
# The child: one configuration
# --------------------------------------------------------------------------

def child(app: str, app_root: str, yml: str, section: str, name: str) -> int:
    """Builds one configuration (abstract) and prints one JSON line."""
    t0 = time.perf_counter()
    os.chdir(app_root)
    os.environ["POPXL_APPS_PY310_DATACLASSES"] = "1"
    if sys.version_info >= (3, 11):
        exec(compile(popxl_apps._PY310_DATACLASSES, "py310_dataclasses", "exec"), {})
    import importlib
    import io
    import contextlib

    import ipuxl.compat
    from ipuxl import settings
    import ipuxl.profile as prof

    ipuxl.compat.install()
    module, func, kwargs = ENTRY_POINTS[app][yml]
    sys.argv = [f"{module}.py"]
    setup = getattr(importlib.import_module("utils.setup"), SETUP[app])
    entry = getattr(importlib.import_module(module), func)
    config_dir = Path(app_root) / "config"
    with contextlib.redirect_stdout(io.StringIO()):
        got = setup(config_dir / yml, section, name)
    config = got[0] if isinstance(got, tuple) else got
    t_imports = time.perf_counter() - t0
    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    model = prof.IpuModel(version="ipu2", allow_out_of_memory=True)
    t1, c1 = time.perf_counter(), time.process_time()
    # POPXL_APP_CONFIGS_CONCRETE=1 (--concrete): with the weights, to check
    # that the abstract build profiles as the concrete one.
    abstract = os.environ.get("POPXL_APP_CONFIGS_CONCRETE") != "1"
    with settings.override(abstract=abstract, offline_device="ipu_model", ipu_model=vars(model)), \
            prof.capture(model) as captured:
        entry(config, **kwargs)
    if not captured:
        raise RuntimeError(f"{module}.{func} created no Session")
    c = captured[-1]
    p = c.finish()
    fit = p.fit(c.ir.replication_factor)
    t_build = time.perf_counter() - t1
    c_build = time.process_time() - c1
    worst = p.worst_tile()
    tpi = int(p.target["tiles_per_ipu"])
    rec = {"app": app, "yml": yml, "config": name, "build_s": round(t_build, 2),
           "imports_s": round(t_imports, 2), "max_rss_imports_mb": round(rss_imports, 1),
           "build_cpu_s": round(time.process_time(), 2), "build_only_cpu_s": round(c_build, 2),
           "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
           "abstract": bool(c.ir.abstract), "ops": len(p.ops["name"]),
           "worst_tile": [worst // tpi, worst % tpi],
           "worst_tile_categories": p.tile_categories(worst),
           "worst_tile_tensors": [list(t) + [_tiles_of(p, t[0])]
                                  for t in p.tensors_on_tile(worst, 8)], **fit}
    save = os.environ.get("POPXL_APP_CONFIGS_SAVE")
    if save:
        p.save(os.path.join(save, f"{app}.{yml[:-4]}.{name}.json"))
    print("POPXL_APP_CONFIG " + json.dumps(rec))
    return 0


def _tiles_of(p, name: str) -> int:
    """How many tiles the model mapped tensor ``name`` on."""
    names = p.tensors["name"]
    return int(p.tensors["tiles"][names.index(name)]) if name in names else 0


# --------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------

def pod_of(name: str):
    m = re.search(r"pod(\d+)", name)
    return int(m.group(1)) if m else None


def format_table(records) -> str:
    lines = ["| app | config | IPUs (per replica x replicas) | peak tile (% of 624 KiB) | "
             "Streaming Memory / replica | fits | POD | build s | max RSS MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['app']} | {r['yml'][:-4]}:{r['config']} | - | - | - | "
                         f"error: {r['error'][:90]} | | {r.get('wall_s', '')} | |")
            continue
        pod = pod_of(r["config"])
        pod_txt = "" if pod is None else ("= POD" if r["ipus"] == pod else f"POD{pod}: differs")
        lines.append(
            f"| {r['app']} | {r['yml'][:-4]}:{r['config']} | {r['ipus']} "
            f"({r['ipus_per_replica']} x {r['replicas']}) | "
            f"{100 * r['peak_tile'] / TILE_BYTES:.1f}% | "
            f"{r['streaming_bytes'] / 2**30:,.2f} GiB | {'yes' if r['fits'] else 'NO'} | "
            f"{pod_txt} | {r['build_s']:.1f} | {r['max_rss_mb']:,.0f} |")
    return "\n".join(lines)


def run_child(app, root: Path, extra, yml, section, name, timeout) -> dict:
    env = dict(os.environ)
    path = [str(p) for p in extra] + [str(Path(__file__).resolve().parent)]
    path += [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(path)
    if env.get("IPUXL_CORE_DIR"):
        env["IPUXL_CORE_DIR"] = os.path.abspath(env["IPUXL_CORE_DIR"])
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("WANDB_MODE", "disabled")
    t0 = time.perf_counter()
    cmd = [sys.executable, "-P", str(Path(__file__).resolve()), "--child", app, str(root), yml,
           section, name]
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"app": app, "yml": yml, "config": name, "error": f"timeout after {timeout} s",
                "wall_s": round(time.perf_counter() - t0, 1)}
    wall = round(time.perf_counter() - t0, 1)
    for line in r.stdout.splitlines():
        if line.startswith("POPXL_APP_CONFIG "):
            rec = json.loads(line[len("POPXL_APP_CONFIG "):])
            rec["wall_s"] = wall
            return rec
    found = popxl_apps._EXC_LINE.findall(r.stderr)
    err = f"{found[-1][0]}: {found[-1][1]}" if found else (r.stderr.strip().splitlines() or
                                                           ["no output"])[-1]
    return {"app": app, "yml": yml, "config": name, "error": err, "wall_s": wall,
            "stderr": r.stderr[-4000:]}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return child(*argv[1:6])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", required=True, help="checkout of graphcore/examples")
    ap.add_argument("--examples-utils", help="checkout of graphcore/examples-utils (git)")
    ap.add_argument("--apps", default=",".join(popxl_apps.APPS))
    ap.add_argument("--config", default="", help="only configurations whose name contains this")
    ap.add_argument("--cache", default=str(Path.home() / ".cache" / "ipuxl" / "popxl_apps"))
    ap.add_argument("--json", default="popxl_app_configs.json")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per configuration")
    ap.add_argument("--save-profiles", metavar="DIR",
                    help="write each configuration's profile.json there (APP.YML.CONFIG.json)")
    ap.add_argument("--concrete", action="store_true",
                    help="build with the weights (small configurations: checks that the abstract "
                         "build profiles the same)")
    args = ap.parse_args(argv)
    if args.concrete:
        os.environ["POPXL_APP_CONFIGS_CONCRETE"] = "1"
    if args.save_profiles:
        os.makedirs(args.save_profiles, exist_ok=True)
        os.environ["POPXL_APP_CONFIGS_SAVE"] = os.path.abspath(args.save_profiles)
    examples = Path(args.examples).resolve()
    eutils = Path(args.examples_utils).resolve() if args.examples_utils else None
    records = []
    with tempfile.TemporaryDirectory(prefix="popxl_app_configs_") as tmp:
        tmp = Path(tmp)
        for app in [a for a in args.apps.split(",") if a]:
            rel = f"nlp/{app}/popxl"
            dest = tmp / app
            popxl_apps.export(examples, [rel, "utils/examples_tests"], dest)
            root = dest / rel
            target = prepare_packages(root, eutils, Path(args.cache), tmp)
            extra = [*popxl_apps.python_paths(root), target]
            for yml, section, name in release_configs(root):
                if args.config not in name:
                    continue
                sys.stderr.write(f"{app} {yml}:{name} ...\n")
                rec = run_child(app, root, extra, yml, section, name, args.timeout)
                sys.stderr.write(f"    {json.dumps({k: v for k, v in rec.items() if k != 'stderr'})[:400]}\n")
                records.append(rec)
    print(format_table(records))
    Path(args.json).write_text(json.dumps(records, indent=1))
    print(f"\nwrote {args.json}")
    return 0


def prepare_packages(root: Path, eutils, cache: Path, tmp: Path) -> Path:
    """The app's package cache directory (``popxl_apps.install``)."""
    specs, _notes, github = popxl_apps.plan_requirements(root / "requirements.txt")
    local = []
    for g in github:
        if g["name"].lower() == "examples-utils" and eutils is not None:
            src = tmp / f"examples-utils-{g['ref']}"
            if not src.exists():
                popxl_apps.export(eutils, ["."], src, g["ref"] or "HEAD")
            local.append(("examples-utils", g["ref"], f"{src}{g['extras']}"))
    target, _installed, _failures = popxl_apps.install(specs, local, cache, tmp, [])
    return target


if __name__ == "__main__":
    sys.exit(main())
