"""One reader per resource family, each a mixin of :class:`~training_clusters.diagram.readers.base.GraphReader`:
network, storage, EKS, ParallelCluster, HyperPod, AWS PCS, and what outlives the stack."""
