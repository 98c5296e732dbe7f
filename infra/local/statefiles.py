"""Files in the local runtime's state directory, written so that a reader (``jobsched local ...``, a test, a
restart after ``kill -9``) sees the old content or the new one, never a half-written file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())
    os.replace(file.name, path)
