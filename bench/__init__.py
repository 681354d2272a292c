"""Benchmarks of workflow-runner against its peers on one embedded PostgreSQL (`make bench`)."""
