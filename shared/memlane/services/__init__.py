"""Use cases, one module each: ingest, extract, search, tasks, memories, stores, scopes, context."""
