"""Amazon Bedrock adapters: Titan embeddings, Converse LLM, rerank."""
