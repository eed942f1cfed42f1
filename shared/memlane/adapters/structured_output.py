"""What both LLM adapters say to a model whose structured answer failed validation."""

from __future__ import annotations

from pydantic import ValidationError

_MAX_ERRORS = 20  # a repair prompt that lists hundreds of errors helps nobody


def describe_validation_error(error: ValidationError) -> str:
    """One line per error, `path: message`, without pydantic's URLs or echoed input."""
    lines = []
    for err in error.errors(include_url=False, include_input=False)[:_MAX_ERRORS]:
        path = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"- {path}: {err['msg']}")
    if error.error_count() > _MAX_ERRORS:
        lines.append(f"- ... and {error.error_count() - _MAX_ERRORS} more")
    return "\n".join(lines)
