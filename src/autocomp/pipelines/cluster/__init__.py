"""Cluster operations: the container images the compiled YAML names (images), where each step
runs (resources), compile, the KFP API client (upload, schedule, submit) and doctor."""
