"""The CPU target: Kernel IR rendered as LLVM IR and JIT-compiled with llvmlite."""
