"""The in-memory mirror of a store, which the recall path reads without SQL.

:mod:`~synapse_retriever.mirror.graph`: the edges as arrays, adjacency and co-use rows;
:mod:`~synapse_retriever.mirror.mirror`: the graph, the node uses and the version read,
kept current with what this and other processes write.
"""
