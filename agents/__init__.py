"""LLM-driven pipelines: chat backends, sandboxed tools, generation loops (``icml26.agents``)."""
