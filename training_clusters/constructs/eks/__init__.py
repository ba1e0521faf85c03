"""EKS for GPU training: the cluster and its nodegroups, the add-ons, the job layer (Kueue, Trainer) and release manifests."""
