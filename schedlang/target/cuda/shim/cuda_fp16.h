// empty: cuda_shim.h defines __half
