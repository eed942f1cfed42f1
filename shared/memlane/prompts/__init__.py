"""Prompt text beside the pydantic model of its answer: LLM output is validated, never scraped."""
