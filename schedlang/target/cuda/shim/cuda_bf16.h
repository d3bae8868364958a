// empty: cuda_shim.h defines __nv_bfloat16
