"""Peers of the attention prefill contracts: torch SDPA per backend, FlexAttention, flash-attn, FlashInfer."""
