"""The Ray engine's test cluster: one local cluster of 2 CPUs (and one declared GPU) per test module."""
import os

import pytest


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The faults directory (gpu_dedup.testing.faults: a file named after a checkpoint kills one worker there)."""
    ray = pytest.importorskip("ray")
    faults = tmp_path_factory.mktemp("faults")
    os.environ["GPU_DEDUP_RAY_FAULTS"] = str(faults)  # inherited by the workers (gpu_dedup.testing.faults)
    # one fake GPU (a resource only: the device workers schedule on this GPU-less machine) and the
    # simulator + strict backend of conftest in every worker process
    sim = {k: os.environ[k] for k in ("NUMBA_ENABLE_CUDASIM", "GPU_DEDUP_STRICT_DEVICE") if k in os.environ}
    # a loaded 2-core machine: the raylet's wait for its agent (default 30 s) timed out under load 24
    os.environ.setdefault("RAY_agent_register_timeout_ms", "180000")
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"worker_process_setup_hook": "gpu_dedup.testing.faults.ray_worker_faults",
                          "env_vars": sim})
    yield faults
    ray.shutdown()
    os.environ.pop("GPU_DEDUP_RAY_FAULTS", None)
