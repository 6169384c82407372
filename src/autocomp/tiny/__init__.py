"""Tiny random-weight variants of every backend, built from configs and saved the way real
weights are, so every code path runs on a CPU offline (tests, the local run)."""
