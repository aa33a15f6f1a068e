"""What the workflow needs beyond the science: config validation and resources, the job
wrapper, provenance records and the audit."""
