"""SageMaker HyperPod orchestrated by EKS: the instance groups that join one of our EKS clusters."""
