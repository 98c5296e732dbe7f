"""jobsched: a serverless job scheduler for AWS. The domain package the Lambda handlers share."""

from typing import Any


def __getattr__(name: str) -> Any:
    """``__version__``, read from the installed metadata only when asked (importlib.metadata costs every CLI
    call tens of milliseconds otherwise)."""
    if name != "__version__":
        raise AttributeError(name)
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jobsched")
    except PackageNotFoundError:  # running from a source tree without installation
        return "0.0.0"
