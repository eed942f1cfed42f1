"""Token counting: a real tokenizer that works offline (a `tokenizer.json` read by the `tokenizers` library)."""
