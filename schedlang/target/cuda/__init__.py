"""The CUDA target (NVIDIA GPUs). Only its Kernel IR passes exist so far; building comes later."""
