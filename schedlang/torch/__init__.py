"""The PyTorch frontend: torch.export capture (Torch IR), ATen -> Tensor IR lowering,
fusion with default schedules, and the `torch.compile` backend.

Importing this package imports torch; `import schedlang` alone does not.
"""
