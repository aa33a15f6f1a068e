"""The paper's findings by id, each with the experiment kind whose numbers it reads.

Standard library only: the config check (`oracle.workflow.plan.config`) names the findings at
DAG-build time without importing the rules (`oracle.report.claims.FINDINGS`, in the same order,
reads each finding's kind here; tests/test_claims.py holds the ids in step).
"""

from __future__ import annotations

#: finding id -> the kind of experiment it is judged on, in claims.csv's order.
FINDING_KINDS: dict[str, str] = {
    "power_law": "scaling",
    "plateau": "scaling",
    "floor_exact": "scaling",
    "archs_differ": "scaling",
    "exponents_differ": "scaling",
    "soft_labels": "labels",
    "soft_calibration": "labels",
    "ece_rate": "scaling",
    "shift_type": "shift",
    "shift_exact": "shift",
    "active_learning": "active",
    "bayes_bound": "scaling",
    "learner_bayes_gap": "difficulty",
}
