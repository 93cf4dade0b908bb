"""`migrate validate`: staged BF16 diff validation of a migrated training program.

Stages (numerics.md §3.1): ``S0 plan`` (parallel plan at the real world size on the ``fake``
process group), ``S1 parity-1card`` (migrated T against the fp32 golden G and the original R in
the same bf16 policy), ``S2 parity-dp`` (DDP / FSDP2 over N ranks against one rank) and
``S3 parity-mp`` (tensor / expert parallel against unsharded).

Layout (each module small and single purpose; torch is imported lazily, never by the CLI):

* :mod:`.options`      what to validate (frozen dataclass built by ``api.validate``)
* :mod:`.metrics`      rel_l2, ratio to golden, error balance, msprobe's report-only columns
* :mod:`.compare`      per-tensor verdicts against the thresholds, localisation
* :mod:`.recorder`     hooks -> safetensors + msprobe-style ``dump.json``
* :mod:`.determinism`  seeds and flags applied in every child, recorded in the manifest
* :mod:`.protocol`     loads ``validate.py`` (or ``--entry``) in a child with the reference layers
* :mod:`.execute`      one forward/backward run of a model under a dtype policy
* :mod:`.worker`       child-process entry point (``python -m migrator.validation.worker JOB``)
* :mod:`.plan`         S0 on the fake process group (child side)
* :mod:`.parallel`     S2/S3 ranks (child side, launched by ``torch.distributed.run``)
* :mod:`.launcher`     starts children and torchrun, collects their status
* :mod:`.stages`       S0-S3 orchestration and gating (parent side)
* :mod:`.results`      frozen result dataclasses, JSON (``validation.schema.json``), Markdown
* :mod:`.msprobe_export`  msprobe's own layout (one ``.pt`` per tensor)
* :mod:`.script_mode`  ``--script train.py``: an unmodified script under global hooks

The reference layers (:mod:`.npu_emulation`, :mod:`.cuda_reference`) are only installed in
child processes and only when the real package is absent; every result says which were used.
"""
