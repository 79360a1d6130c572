# Single source of the version (read by scikit-build-core's regex provider).
__version__ = "0.1.0"
