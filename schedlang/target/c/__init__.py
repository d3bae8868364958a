"""The c target: Kernel IR as portable C99, compiled by the system C compiler and loaded with ctypes."""
