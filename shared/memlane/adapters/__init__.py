"""Implementations of the ports. Only adapters, bootstrap and config touch engines, SDKs and the environment."""
