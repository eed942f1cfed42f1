"""Pure decision rules: ranking, time expressions, consolidation. No I/O."""
