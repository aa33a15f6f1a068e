"""Measures: what is computed from posteriors and predictions (calibration, power-law fits,
the world's exact constants, label-free accuracy estimators, acquisition scores)."""
