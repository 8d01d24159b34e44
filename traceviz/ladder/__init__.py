"""The CUDA LSTM study's ladder: rungs, capture, read back, whatif prediction."""
