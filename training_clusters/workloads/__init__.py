"""Kubernetes objects as plain data, free of CDK: queues and runtimes, the NCCL job, MIG, team tenancy, Pod Security,
storage (the teams' FSx for Lustre volumes, a gp3 StorageClass)."""
