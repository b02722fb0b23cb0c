"""Peers of int4_matmul: torch (cuBLAS on the dequantized weight, torch's own int4 kernel) and vLLM's Marlin."""
