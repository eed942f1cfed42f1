"""Limits on what one request may carry. Every limit is answered with 400/413 and a clear code."""

MAX_MESSAGES_PER_ADD = 96  # one add is one atomic table transaction (DynamoDB allows 100 items)
MAX_CONTENT_CHARS = 32_000  # per message, and for a plain-text add
MAX_ROLE_CHARS = 32
MAX_NAME_CHARS = 128
MAX_QUERY_CHARS = 4_000
MAX_TOP_K = 100
DEFAULT_TOP_K = 10
MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50
MAX_METADATA_BYTES = 8_192
MAX_METADATA_DEPTH = 4
MAX_METADATA_KEYS = 64
MAX_LIST_VALUES = 100  # one list in metadata or a filter ("any of"), and a scope selector's list of ids
MAX_JSON_DEPTH = 32  # nesting of a request body; metadata has its own, tighter MAX_METADATA_DEPTH
MAX_METADATA_INT = 2 ** 63 - 1  # integers in metadata fit 64 bits (SQLite; DynamoDB numbers keep 38 digits)
MAX_REQUEST_ID_CHARS = 128
MAX_INSTRUCTIONS_CHARS = 8_000
MAX_BODY_BYTES = 2_000_000
# An extraction's outcome keeps the start of the statement it wrote (the memory itself holds all of it): a task
# is one table item, at most 400 KB on DynamoDB, and one add may yield a hundred statements of 30,000 characters.
MAX_OUTCOME_TEXT_CHARS = 500
# ... and the extractor's answer it records for a retry (models.Task.answer), when it is no larger than this as JSON;
# a larger one is not recorded, and a retry asks the model again.
MAX_RECORDED_ANSWER_BYTES = 128_000
MAX_MEMORIES_PER_WRITE = 50  # an explicit write (infer: false) is one table transaction
MAX_ADDS_PER_BATCH = 100  # adds in one POST .../memories:batch (each its own transaction)
MAX_THREAD_SCAN = 1000  # registry entries one thread-list page reads at most (narrowed to an agent)
MAX_MEMORY_SCAN = 1000  # memories one memory-list page reads at most (narrowed to agents or runs)
MAX_PROFILE_TEXT_CHARS = 8_000  # an explicit profile's text (a role and standing instructions)
MAX_PROFILE_ATTRIBUTES = 64
MAX_PROFILE_VALUE_CHARS = 1_000

# Thread summaries: a store's trigger (tokens not yet summarised) and how many recent messages stay out.
DEFAULT_SUMMARY_TRIGGER_TOKENS = 2_000
MIN_SUMMARY_TRIGGER_TOKENS = 100
MAX_SUMMARY_TRIGGER_TOKENS = 100_000
DEFAULT_SUMMARY_KEEP_RECENT = 6
MAX_SUMMARY_KEEP_RECENT = 200
MAX_AUDIT_RETENTION_DAYS = 3650  # MEMLANE_AUDIT_RETENTION_DAYS at most
