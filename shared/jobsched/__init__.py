"""jobsched: a serverless job scheduler for AWS. The domain package the Lambda handlers share."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("jobsched")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"
