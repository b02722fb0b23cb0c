"""Production peers of the rotary ops: one adapter module per library."""
