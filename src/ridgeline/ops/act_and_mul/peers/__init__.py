"""Peer implementations of the gated activations (one module per production peer)."""
