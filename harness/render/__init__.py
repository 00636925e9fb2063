"""Results drawn and written for people: report.md/report.html (report, seed_report for a
--seeds folder), the pictures (plots) and the console table (console); calibrate's fit.png is
drawn beside its command, in harness.cli.calibrate.plot."""
