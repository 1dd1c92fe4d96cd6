"""Learning and forgetting, as pure functions over plain numbers and arrays.

:mod:`~synapse_retriever.learning.decay`: Hebbian reinforcement, exponential decay at a
learned half-life, the LTP floor, pruning, and the vectorised update of one event's edges.
:mod:`~synapse_retriever.learning.usage`: how often and how recently each node was used
(the ACT-R base level the default recall rule reads).
"""
