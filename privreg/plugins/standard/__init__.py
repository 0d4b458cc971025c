"""The ``standard`` plugin: registers the mechanisms, randomizers and sensitivities of
:mod:`privreg.mechanisms` (entry point ``standard = "privreg.plugins.standard.hooks"``),
with their citations, demo steps and workflows. The code itself lives in
:mod:`privreg.mechanisms`, which every paper plugin imports instead of this one."""
