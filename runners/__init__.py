"""Runners: producers of raw evidence (streaming client, GPU and container probes)."""
