"""The constructs every orchestrator stands on: network, FSx for Lustre, bucket, placement group, Session Manager."""
