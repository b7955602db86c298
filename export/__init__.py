"""canis export: PyTorch models to ONNX with metadata and parity checks."""
