"""Results drawn and written for people: report.md/report.html (report, seed_report for a
--seeds folder), the pictures (plots, fit_plot) and the console table (console)."""
