"""The run-time floor every program stands on: devices and kernels' compilation, the output directories a
run owns, the work directory, the local passes over the input, the run skeleton and the program shape."""
