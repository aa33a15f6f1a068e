"""The command-line tools: what inspects a run rather than computes it.

The audit family (`audit` and its `audit_*` parts, `rebuild`, `artifact_diff`), run comparison
(`comparison`, its command line `compare`), the projected GPU cost and the GPU install checks
(`gpu`), and the findings page (`findings_doc`). Used from the command line and scripts/tools/;
no rule script and no other part of `oracle` imports them (tests/test_layering.py).
"""
