"""Validation of an oracle world against the real data: feature networks, metrics, the run."""
