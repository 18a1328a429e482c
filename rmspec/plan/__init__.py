"""The planner: spec -> Plan (shape, memory, strategy, batch split, accelerate config, launch argv).

Light: never imports torch, transformers, datasets or accelerate. What a plan depends on besides
the spec, the hardware profile and the model shape is listed in rmspec.plan.compile.
"""

from rmspec.plan.artifact import load_plan, read_plan, save_plan, write_launch_files
from rmspec.plan.compile import compile_plan
from rmspec.plan.plan import Plan

__all__ = ["Plan", "compile_plan", "load_plan", "read_plan", "save_plan", "write_launch_files"]
