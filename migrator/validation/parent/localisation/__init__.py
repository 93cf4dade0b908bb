"""Where a failing comparison went wrong: the first failing module, the first divergent op,
and the data-flow walk between them."""
