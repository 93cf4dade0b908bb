"""`migrate advise --profile DIR`: check the pre-hardware performance findings against a torch_npu
profile (the `*_ascend_pt` folder: ASCEND_PROFILER_OUTPUT/ kernel_details.csv, op_statistic.csv,
trace_view.json, step_trace_time.csv) and run Huawei's `msprof-analyze advisor all -d DIR` where it is
installed. Standard library only; the profile is read, never executed."""
