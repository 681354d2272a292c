"""The local runtime: the Lambda handlers wired together the way template.yaml wires
them in AWS, on any PostgreSQL, with a business clock that only moves when told."""
