"""AWS ParallelCluster: a Slurm cluster through ParallelCluster's own CloudFormation provider."""
