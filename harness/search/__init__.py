"""Searching a policy in virtual time: ``harness sweep`` (a grid) and ``harness tune`` (Optuna),
and what they share: the objective and constraint grammar, ties over paired seeds, the
process and cluster pools their simulations run in, and ``--verify-live``."""
