"""Peers of paged decode attention: one adapter module per production implementation."""
