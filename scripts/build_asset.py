"""Build the Lambda asset without Docker: jobsched + functions + the pinned runtime dependencies, installed
by pip for the Lambda platform (arm64, CPython 3.13, binary wheels only). Prints the asset's path.

    python scripts/build_asset.py [--out build/lambda]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ["--platform", "manylinux2014_aarch64", "--implementation", "cp", "--python-version", "3.13"]


def build(out: Path) -> Path:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--target",
            str(out),
            *PLATFORM,
            "--only-binary=:all:",
            "--no-compile",
            *dependencies,
        ],
        check=True,
    )
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "shared" / "jobsched", out / "jobsched", ignore=ignore)
    shutil.copytree(ROOT / "functions", out / "functions", ignore=ignore)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "lambda")
    print(build(parser.parse_args().out))


if __name__ == "__main__":
    main()
