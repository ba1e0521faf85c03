"""AWS Parallel Computing Service: a managed Slurm controller with our node groups and queues."""
