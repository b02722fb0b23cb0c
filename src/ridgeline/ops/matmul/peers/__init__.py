"""Peers of the GEMM: one module per production implementation."""
