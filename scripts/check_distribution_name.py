"""CI check: our distribution name on the public package index is free, or holds only our project.

``pip install agentvm`` once installed an unrelated 2023 project (issue 24): a README that names a
distribution we do not own sends every user to someone else's code. This asks PyPI's JSON API
about ``agentvm-runtime`` (pyproject.toml's name): 404 means nobody has it (fine); a project there
must be ours (its summary is pyproject.toml's description), else CI fails.

Not ``pip download``: for a project that ships only an sdist, pip runs its build backend to read
the metadata, i.e. the other project's code on the CI machine. Not in pytest either: the tests never
leave loopback. PyPI being slow is not a verdict: each attempt has a timeout and is retried with a
growing pause; only when every attempt failed does the check fail, saying PyPI was unreachable.

Run: ``./dev python scripts/check_distribution_name.py`` (``.ci/run`` does).
"""

from __future__ import annotations

import json
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ATTEMPTS = 4
TIMEOUT_S = 20


def ours() -> tuple[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["name"], project["description"]


def index_entry(name: str) -> dict | None:
    """PyPI's JSON for ``name``, None when the index has no such project; raises after ATTEMPTS."""
    url = f"https://pypi.org/pypi/{name}/json"
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:  # noqa: S310 (a fixed https URL)
                return json.load(answer)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            error: Exception = exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            error = exc
        print(f"PyPI attempt {attempt}/{ATTEMPTS} failed: {error}", file=sys.stderr)
        if attempt < ATTEMPTS:
            time.sleep(5 * attempt)
    raise SystemExit(f"could not ask PyPI about {name!r} ({ATTEMPTS} attempts): check the network and rerun")


def main() -> int:
    name, description = ours()
    entry = index_entry(name)
    if entry is None:
        print(f"{name}: not on PyPI (free; nobody else's package installs under our name)")
        return 0
    summary = (entry.get("info") or {}).get("summary") or ""
    if summary.strip() == description.strip():
        print(f"{name}: on PyPI, and it is ours (summary matches pyproject.toml)")
        return 0
    print(
        f"{name}: PyPI has a project under our name that is not ours (summary {summary!r}); "
        "pick another distribution name (pyproject.toml, README, docs) before anyone follows the README",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
