"""Production peers of LayerNorm, one adapter per vendor; an absent package is "not installed"."""
