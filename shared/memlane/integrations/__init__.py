"""Framework integrations over the SDK (docs/integrations.md): `memlane.integrations.langgraph`
(`pip install 'memlane[langgraph]'`) and `memlane.integrations.strands` (`pip install 'memlane[strands]'`).

Nothing here is imported by `import memlane`: each module needs its framework installed."""
