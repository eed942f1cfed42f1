"""memlane — durable, scoped memory for agents."""

__version__ = "0.1.0"
