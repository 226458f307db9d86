"""Cold start of the Lambda functions: what each handler imports, and what Lambda has to load.

1. Import time of each handler module in a fresh interpreter, and its Lambda init (the import with
   ``AWS_LAMBDA_FUNCTION_NAME`` set: the runtime is built too), median of 9
   (``scripts/measure_imports.py``).
2. ``sam build`` (SAM CLI from ``.venv-sam``), then the size of every layer and function package in
   ``.aws-sam/build``: unzipped, and zipped as a deployment archive (deflate).
3. The third-party layer by top-level package, against Lambda's 250 MB limit, with what would
   shrink it.

Run: ``./dev python -m benchmarks.cold_start [--runs 9] [--no-build]``
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / ".aws-sam" / "build"
DEPS_LAYER = "DepsLayer"
# Lambda: a function's deployment package and all its layers, extracted, may not exceed 250 MB
# (AWS Lambda quotas, "Deployment package (.zip file archive) size"; the AccountLimit
# CodeSizeUnzipped of the Lambda API). Zipped uploads are capped at 50 MB direct, more through S3.
UNZIPPED_LIMIT_MB = 250
PROVIDER_SDKS = ("anthropic", "openai")  # imported only when a turn uses that provider
_MB = 1024 * 1024


@dataclass
class Package:
    """One build artifact (a layer or a function), with sizes per top-level entry of its tree."""

    name: str
    files: int = 0
    unzipped: int = 0
    zipped: int = 0
    top: dict[str, list[int]] = field(default_factory=dict)  # entry -> [unzipped, zipped]
    pyc_sources: int = 0  # bytes of .py files that also ship compiled


def _measure_imports() -> Any:
    spec = importlib.util.spec_from_file_location("measure_imports", ROOT / "scripts" / "measure_imports.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def loaded_at_init(name: str) -> set[str]:
    """The top-level packages a fresh interpreter holds after function ``name``'s Lambda init."""
    code = f"import sys, functions.{name}.app; print(' '.join({{m.partition('.')[0] for m in sys.modules}}))"
    env = _measure_imports().lambda_environment(name)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    )
    return set(out.stdout.split())


def sam_build() -> Path:
    """``sam build`` with the project's SAM CLI (its own venv); the layers' Makefiles need the
    project's Python on PATH."""
    sam = ROOT / ".venv-sam" / "bin" / "sam"
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env["SAM_CLI_TELEMETRY"] = "0"
    subprocess.run(
        [str(sam), "build", "--region", "us-east-1"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    return BUILD


def measure_package(path: Path) -> Package:
    """Sizes of one artifact: every file, and the archive Lambda would receive (deflated zip)."""
    package = Package(path.name)
    root = path / "python" if (path / "python").is_dir() else path  # a layer's code is under python/
    with tempfile.TemporaryFile() as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            archive.write(file, file.relative_to(path))
            info = archive.getinfo(str(file.relative_to(path)))
            package.files += 1
            package.unzipped += info.file_size
            package.zipped += info.compress_size
            rel = file.relative_to(root) if file.is_relative_to(root) else file.relative_to(path)
            entry = package.top.setdefault(_top_level(rel), [0, 0])
            entry[0] += info.file_size
            entry[1] += info.compress_size
            if file.suffix == ".py" and _compiled(file).exists():
                package.pyc_sources += info.file_size
    return package


def _function_names() -> list[str]:
    return [p.name for p in (ROOT / "functions").iterdir() if (p / "app.py").is_file()]


def _top_level(rel: Path) -> str:
    """The distribution a file belongs to, by its first path part (metadata folded into its package)."""
    first = rel.parts[0]
    if first.endswith((".dist-info", ".egg-info")):
        return re.split(r"-\d", first, maxsplit=1)[0].lower().replace("-", "_") + " (metadata)"
    return first.removesuffix(".py")


def _compiled(source: Path) -> Path:
    return source.parent / "__pycache__" / f"{source.stem}.cpython-311.pyc"


def _botocore_data(layer: Path) -> tuple[int, int]:
    """Bytes of botocore's service models, and of those the code's clients need."""
    data = layer / "python" / "botocore" / "data"
    used = _services_used()
    total = kept = 0
    for file in data.rglob("*"):
        if file.is_file():
            size = file.stat().st_size
            total += size
            service = file.relative_to(data).parts[0]
            if file.parent == data or service in used:  # shared files (endpoints, partitions) stay
                kept += size
    return total, kept


def _services_used() -> set[str]:
    """The AWS services the code makes clients for (``boto3.client("...")``), and PynamoDB's."""
    found = {"dynamodb"}
    for source in (ROOT / "shared" / "agentvm").rglob("*.py"):
        found |= set(re.findall(r'boto3\.client\(\s*"([a-z0-9-]+)"', source.read_text()))
    return found


# -- the report ----------------------------------------------------------------------------------
def _mb(n: float) -> str:
    return f"{n / _MB:,.1f}"


def _size(n: float) -> str:
    return f"{n / _MB:,.1f} MB" if n >= _MB / 10 else f"{n / 1024:,.0f} KB"


def report(quick: bool = False, *, build: bool = True) -> str:
    """The Markdown section of BENCHMARKS.md (``benchmarks/run_all.py``)."""
    rows = _measure_imports().measure(3 if quick else 9)  # every function of template.yaml
    out = [
        "## Cold start: handler imports and package sizes\n",
        f"Import time of each handler module in a fresh interpreter, median of {3 if quick else 9}, minus an "
        "empty interpreter (`scripts/measure_imports.py`; targets from docs/cold-start.md). *Lambda init* is "
        "the same import inside a Lambda environment, where the runtime is built too: the work of Lambda's "
        "INIT phase, on this machine (Lambda gives 256 MB about 0.14 vCPU: 1,769 MB is one).\n",
        "| module | import ms | target ms | met | Lambda init ms |",
        "|---|---:|---:|---|---:|",
    ]
    for r in rows:
        target = "—" if r["target_ms"] is None else r["target_ms"]
        met = "—" if r["met"] is None else ("yes" if r["met"] else "**no**")
        out.append(f"| `{r['module']}` | {r['import_ms']} | {target} | {met} | {r['lambda_init_ms']} |")
    if build:
        try:
            sam_build()
        except (OSError, subprocess.CalledProcessError) as exc:
            out.append(f"\n`sam build` failed ({exc}); sizes are from the last build, if any.")
    if not BUILD.is_dir():
        return "\n".join(out) + "\n\nNo `.aws-sam/build` to measure.\n"
    return "\n".join(out + [""] + _sizes([measure_package(p) for p in sorted(BUILD.iterdir()) if p.is_dir()]))


def _sizes(packages: list[Package]) -> list[str]:
    layers = [p for p in packages if p.name.endswith("Layer")]
    functions = [p for p in packages if not p.name.endswith("Layer")]
    deps = next(p for p in layers if p.name == DEPS_LAYER)
    mounted = sum(p.unzipped for p in layers)
    biggest = mounted + max(f.unzipped for f in functions)
    out = [
        "Deployment artifacts of `sam build` (`.aws-sam/build`); zipped: deflate, as in the archives "
        "Lambda receives. Sizes are file bytes (`du` shows more: 4 KB blocks for every small file).\n",
        "| artifact | files | unzipped | zipped |",
        "|---|---:|---:|---:|",
        *(
            f"| {p.name} | {p.files:,} | {_size(p.unzipped)} | {_size(p.zipped)} |"
            for p in layers + functions
        ),
        "",
        f"Every function mounts both layers: {_mb(biggest)} MB unzipped of Lambda's {UNZIPPED_LIMIT_MB} MB "
        f"limit for a function and its layers ({biggest / _MB / UNZIPPED_LIMIT_MB:.0%}); "
        f"{_mb(sum(p.zipped for p in layers))} MB zipped.\n",
        f"The {DEPS_LAYER} by top-level package (metadata directories counted with their package):\n",
        "| package | unzipped MB | zipped MB | share of the layer |",
        "|---|---:|---:|---:|",
    ]
    ranked = sorted(deps.top.items(), key=lambda kv: -kv[1][0])
    for name, (unzipped, zipped) in ranked[:12]:
        out.append(f"| {name} | {_mb(unzipped)} | {_mb(zipped)} | {unzipped / deps.unzipped:.0%} |")
    rest = [sum(v[0] for _, v in ranked[12:]), sum(v[1] for _, v in ranked[12:])]
    share = rest[0] / deps.unzipped
    out.append(f"| {len(ranked) - 12} others | {_mb(rest[0])} | {_mb(rest[1])} | {share:.0%} |")
    out += [
        "",
        "What each function's Lambda init loads of it (top-level packages in `sys.modules` afterwards):\n",
    ]
    out += ["| function | packages loaded | their size | share of the layer |", "|---|---|---:|---:|"]
    ever: set[str] = set()
    for function in sorted(_function_names()):
        loaded = sorted(loaded_at_init(function) & set(deps.top))
        ever |= set(loaded)
        size = sum(deps.top[p][0] for p in loaded)
        names = ", ".join(loaded[:8]) + (f" and {len(loaded) - 8} more" if len(loaded) > 8 else "")
        out.append(f"| {function} | {names} | {_mb(size)} MB | {size / deps.unzipped:.0%} |")
    never = sorted(
        ((k, v[0]) for k, v in deps.top.items() if k not in ever and "(metadata)" not in k),
        key=lambda kv: -kv[1],
    )
    out.append(
        "\nBotocore is counted whole (it reads only the service models of its clients). Loaded by no "
        f"function's init: {_mb(sum(v for _, v in never))} MB, mostly "
        + ", ".join(f"{k} ({_mb(v)} MB)" for k, v in never[:4])
        + "."
    )
    return out + ["", *_what_it_costs(deps, mounted)]


def _what_it_costs(deps: Package, mounted: int) -> list[str]:
    sdks = sum(
        sum(v[0] for k, v in deps.top.items() if k == sdk or k == f"{sdk} (metadata)")
        for sdk in PROVIDER_SDKS
    )
    data, kept = _botocore_data(BUILD / DEPS_LAYER)
    used = ", ".join(sorted(_services_used()))
    headroom = UNZIPPED_LIMIT_MB * _MB - mounted
    return [
        "What it costs:\n",
        f"* **The size limit.** The layers take {mounted / _MB:.0f} of the {UNZIPPED_LIMIT_MB} MB a function "
        f"may unpack; {_mb(headroom)} MB are left for everything the project adds (a new provider SDK, "
        "a tokenizer, a sandbox client). Exceeding it fails the deploy, not a request.",
        "* **Cold start.** Lambda fetches and unpacks the archives of a new execution environment "
        "before INIT; AWS publishes no per-MB figure, and the zipped size is what moves. The import "
        "work measured above is the larger part: a handler loads a fraction of the layer (table above; "
        "the provider SDKs are imported by the worker on its first turn of that provider, not at init), "
        "and botocore reads only the service models of the clients it builds.",
        "* **Deploys and storage.** Each layer version is stored (75 GB of code per Region by default) "
        "and uploaded on every change of `layers/deps/requirements.txt`.",
        "",
        "What would shrink it (not done here):\n",
        f"* Move the provider SDKs ({', '.join(PROVIDER_SDKS)}: {_mb(sdks)} MB, "
        f"{sdks / deps.unzipped:.0%} of the layer) into a layer of their own, attached to the functions that "
        "call models only.",
        f"* Keep only the botocore service models the code uses ({used}): {_mb(data)} MB of models, "
        f"{_mb(data - kept)} MB of them for services never called. A build step after `pip install`; "
        "a new client needs its model added back.",
        f"* Ship compiled modules without their sources: {_mb(deps.pyc_sources)} MB of `.py` files have "
        "a `.pyc` next to them; the price is tracebacks without source lines.",
        "* boto3 and botocore cannot simply come from the runtime instead: PynamoDB needs botocore, "
        "and a layer's copy shadows the runtime's (layers/deps/requirements.txt).",
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="3 interpreter runs per import instead of 9")
    parser.add_argument("--no-build", action="store_true", help="measure the existing .aws-sam/build")
    args = parser.parse_args()
    print(report(args.quick, build=not args.no_build))


if __name__ == "__main__":
    main()
