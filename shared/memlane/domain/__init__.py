"""Domain core: models, scope rules and errors. Imports only the stdlib and pydantic."""
