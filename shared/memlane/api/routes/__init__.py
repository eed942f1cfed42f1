"""Routes, split by the Lambda function that serves them on AWS (ingest, search, tasks, stores)."""
