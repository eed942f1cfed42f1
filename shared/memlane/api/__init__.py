"""HTTP API: routes per function family, request/response models, and the one error → HTTP mapping."""
