"""Capture: turning activity into co-activation events.

:mod:`~synapse_retriever.capture.coactivation`: id checks, de-duplication, stable ids.
:mod:`~synapse_retriever.capture.runs`: the ids one agent or chain run used together.
:mod:`~synapse_retriever.capture.gitlog`: a git history read as commits of files.
:mod:`~synapse_retriever.capture.bootstrap`: a history replayed into a store, a warm start.
"""
