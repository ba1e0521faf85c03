"""Kubernetes objects as plain data, free of CDK: queues and runtimes, the NCCL job, MIG, team tenancy, Pod Security."""
