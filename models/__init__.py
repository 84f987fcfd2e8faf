"""HF-style architectures, one config and model per method (``icml26.models``)."""
