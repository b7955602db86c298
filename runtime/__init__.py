"""canis runtime: what a game embeds. numpy, ONNX Runtime and the native core; never torch."""
