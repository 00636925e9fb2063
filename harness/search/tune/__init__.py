"""``harness tune``: judge (a trial, the early stop, the ranking), plan, study (Optuna, the
holdout), table, plot (pareto.png), tuned_yaml (tuned.yaml), command."""
