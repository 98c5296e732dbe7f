"""Install Debian's chromium for the console's screenshot tests when it is missing, in the background.

`make test` starts this first, so the download overlaps with the virtualenv, lint and type checks; the
screenshot tests wait for build/chromium.status to say ``ok`` (or skip, naming why it could not be
installed: no root, no network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

STATUS = Path(__file__).resolve().parents[1] / "build" / "chromium.status"


def write(status: str) -> None:
    STATUS.parent.mkdir(parents=True, exist_ok=True)
    STATUS.write_text(status + "\n")


def install() -> None:
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]
    if os.geteuid() != 0:
        command = ["sudo", "-n", *command]
    for attempt in range(2):
        result = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
        if result.returncode == 0 and shutil.which("chromium"):
            write("ok")
            return
        if attempt == 0:  # an old package index: update it once and try again
            update = ["apt-get", "update", "-q"] if os.geteuid() == 0 else ["sudo", "-n", "apt-get", "update", "-q"]
            subprocess.run(update, env=environment, capture_output=True, check=False)
    write("failed: " + (result.stderr.strip().splitlines() or ["apt-get failed"])[-1])


def main() -> None:
    if shutil.which("chromium"):
        write("ok")
        return
    if shutil.which("apt-get") is None:
        write("unavailable: no apt-get on this machine")
        return
    if os.geteuid() != 0 and subprocess.run(["sudo", "-n", "true"], capture_output=True, check=False).returncode != 0:
        write("unavailable: installing chromium needs root (or sudo without a password)")
        return
    write("installing")
    if "--background" in sys.argv:
        subprocess.Popen(
            [sys.executable, __file__],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return
    install()


if __name__ == "__main__":
    main()
