"""Dream engines: turn a scope's memories and recent messages into consolidation proposals.

`rules` runs without a model (attribute patterns, embedding similarity); `llm` asks the configured
LLM with a strict output schema. Both are pure: services/dream.py gathers their input and records,
applies (services/dream_actions.py) and schedules (services/dream_schedule.py) what they propose."""
