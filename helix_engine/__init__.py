"""helix_engine: the optimization workflow as a library (no UI imports, ever)."""

__version__ = "0.1.0"
