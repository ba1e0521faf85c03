"""SageMaker HyperPod with Slurm: the cluster and its lifecycle scripts."""
