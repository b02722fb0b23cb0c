"""Production peers of the RMSNorm family, one adapter per vendor; an absent package is "not installed"."""
