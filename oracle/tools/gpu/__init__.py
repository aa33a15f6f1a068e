"""GPU: the projected cost of a run per stage (`cost`) and the checks of a GPU install at a
preset's real shapes (`check`)."""
