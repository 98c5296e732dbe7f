"""Schedule expressions (``expressions``), DST resolution (``dst``) and fire-time computation (``engine``).

Pure: ``now`` and ``after`` are arguments. Import the submodules directly; the job spec imports
``expressions`` and ``engine`` imports the spec, so this package re-exports nothing.
"""
