"""`migrate validate`: staged BF16 diff validation of a migrated training program.

Stages (numerics.md §3.1): ``S0 plan`` (parallel plan at the real world size on the ``fake``
process group), ``S1 parity-1card`` (migrated T against the fp32 golden G and the original R in
the same bf16 policy), ``S2 parity-dp`` (DDP / FSDP2 over N ranks against one rank) and
``S3 parity-mp`` (tensor / expert parallel against unsharded).

Layout: two packages that never import each other (``tests/test_import_graph.py``) and the few
modules they share. Torch is imported lazily, never by the CLI; validation never imports the api
(``api`` passes `migrate fix` in as a callable).

Shared (this package's own modules, torch-free at import):

* :mod:`.records`      the contract: typed, frozen job and status records, strict JSON both ways
* :mod:`.metrics`      rel_l2, ratio to golden, error balance, msprobe's report-only columns
* :mod:`.dumps`        reads a saved run (``dump.json`` + safetensors)
* :mod:`.determinism`  seeds and flags (the parent sets the environment, the child applies them)
* :mod:`.op_semantics` the semantic arguments of known op pairs and their diff

Parent side, :mod:`.parent` (the user's process; orchestration and judgement):

* ``options``  what to validate (frozen dataclass built by ``api.validate``)
* ``stages/``  S0-S3 as a registry (``s0``, ``s1``, ``parallel``, ``script``; ``bench`` for ``--bench``,
  ``recorded`` for ``--record``/``--compare``) and the one gating loop; ``stage_kit`` what every stage uses
* ``launcher`` starts children and torchrun with a job record, reads their status records
* ``compare``, ``compare_train``  per-tensor and k-step verdicts against the thresholds, localisation
* ``op_localise``  first divergent op from two op traces; ``policy`` compares precision policies
* ``stages/script``, ``script_parallel``  ``--script train.py`` (S1, S2 under torchrun)
* ``stages/bench``, ``benchreport``, ``peaks``  ``--bench`` repeats, figures and device peaks
* ``results``  frozen result dataclasses, JSON (``validation.schema.json``), Markdown
* ``msprobe_export``  msprobe's own layout (one ``.pt`` per tensor)

Child side, :mod:`.child` (the program's own process, ``python -m migrator.validation.child.worker``):

* ``worker``    reads the job, runs it, writes its status record (always, a harness failure too)
* ``protocol``  loads ``validate.py`` (or ``--entry``) with the right reference layers
* ``execute``   one forward/backward run of a model under a dtype policy; ``recorder`` its dump
* ``plan`` (S0 on the fake process group), ``parallel`` (one rank of S2/S3), ``bench`` (one repeat),
  ``optrace`` (op tracer inside one module), ``script_hooks`` (an unmodified script under global hooks),
  ``policy_probe`` (the effective precision policy), ``handoff`` (original -> migrated weights)

The reference layers (:mod:`.child.npu_emulation`, :mod:`.child.cuda_reference`) are only installed in
child processes and only when the real package is absent; every result says which were used.
"""
