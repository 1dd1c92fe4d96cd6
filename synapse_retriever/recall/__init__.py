"""Recall: how learned associations fold into a ranked hit list, one rule per module.

:mod:`~synapse_retriever.recall.actr`: the default rule, ACT-R retrieval (base level plus
association with the hits) and its swap. :mod:`~synapse_retriever.recall.published`: the
method as published, spreading activation with boost and displacement.
:mod:`~synapse_retriever.recall.hits`: what both share (hits, activation, plans, slots, and
the validation of a hit list). :mod:`~synapse_retriever.recall.items`: recall over the
adapters' objects (LangChain Documents, LlamaIndex nodes).
"""
