"""Peers of the FP8 GEMM and the quantizers: one module per production peer."""
