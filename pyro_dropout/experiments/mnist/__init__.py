"""The MNIST experiments: OOD and misclassification detection, the rotated digit, Concrete rates."""
