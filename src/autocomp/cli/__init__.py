"""The `autocomp` command line (entry point `autocomp.cli.main:entry`)."""
