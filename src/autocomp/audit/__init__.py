"""The human audit (paper A.10, A.11): export a blinded study, serve it to annotators in a
browser, collect their answers as the CSVs `autocomp report` reads, and compare two judges."""
