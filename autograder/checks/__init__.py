"""Hidden checks, one module per assignment (`<assignment>.py`), written as pytest tests.

A check's first parameter names the exercise it grades. See autograder/hidden.py
for how they run inside a grading kernel and conftest.py for how pytest runs
them against the reference solutions.
"""

# Assignments whose answers and checks start no process by the course's start method
# (helpers.workers, COURSE_START_METHOD): no worker pool, no DataLoader workers, no DDP ranks of
# ddp_worker; 12's ranks come from helpers.ranks, whose forkserver ignores that variable. Their
# checks under spawn would repeat grading's own run exactly, so bin/test's pass under spawn leaves
# them out. tests/test_layout.py fails when one of them starts to use processes.
START_METHOD_FREE = ("08_amp_tensor_cores", "10_model_pipeline_parallel", "11_profiling_scaling",
                     "12_collectives_sharding")
