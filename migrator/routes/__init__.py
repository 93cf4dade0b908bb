"""Framework routes: Megatron -> MindSpeed, DeepSpeed's NPU accelerator, transformers/accelerate on NPU.

`detect` finds the framework and version of a scan root; `table` loads the generated route table
(`framework_routes/routes.json`); `apply` marks the findings a route covers. Adding a route is data
(framework_routes/routes.in.yaml + generate.py) plus at most one module.
"""

from migrator.routes.apply import CHOICES, FrameworkRoute, apply_routes, residual

__all__ = ["CHOICES", "FrameworkRoute", "apply_routes", "residual"]
