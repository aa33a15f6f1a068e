"""Planning: what the workflow derives from a config, in plain values (the Snakefile imports it
at DAG-build time, so standard library only, with PyYAML and jsonschema for the config).

Re-exported here (``plan.world_specs``):

``worlds``       each world's parameters with the base world's defaults and seeds, and the
                 config keys they come from; the world kind; the class prior
``archs``        classifier architectures and their labels
``experiments``  the experiments checked and completed by their kinds, the classifiers they
                 train, the sets those are scored on, each world's splits
``evalsets``     evaluation-set names (a world's test set, a noisy copy of it)
``flows``        shards, the flow's spec and step count

Imported by name: ``config`` (loading, schema, validation, checks), ``config_paths`` (the
dotted config keys of errors and curve settings), ``paths`` (every path of a run: ``RunPaths``),
``rule_params`` (the rules' wildcard helpers), ``resources`` (rule resources, the torchrun
launch), ``rehearsal`` (a preset rehearsed in miniature).
"""

from oracle.workflow.plan.archs import *  # noqa: F403
from oracle.workflow.plan.evalsets import *  # noqa: F403
from oracle.workflow.plan.experiments import *  # noqa: F403
from oracle.workflow.plan.flows import *  # noqa: F403
from oracle.workflow.plan.worlds import *  # noqa: F403
