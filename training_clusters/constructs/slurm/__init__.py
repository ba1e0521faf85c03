"""What Slurm clusters share (HyperPod and ParallelCluster): the accounting database and team users."""
