"""Exact-posterior oracle worlds built from normalizing flows.

The library behind the Snakemake pipeline; it knows nothing of Snakemake. See DESIGN.md and
README.md for the map of modules.
"""

__version__ = "0.1.0"
