"""Validation across nodes: which node this is, node 0's rendezvous side, the followers, the guard."""
