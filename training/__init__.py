"""canis training: BVH import, labels, datasets, PyTorch models and the training loop."""
