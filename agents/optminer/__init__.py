"""Opt-Miner: tree-guided synthesis of optimisation problems, retrieval and solver-checked scoring."""
