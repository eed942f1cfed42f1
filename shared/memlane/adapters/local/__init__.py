"""Embedded adapters for the local mode."""
