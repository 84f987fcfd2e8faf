"""Losses, TRL/HF trainers and non-neural learning algorithms (``icml26.training``)."""
