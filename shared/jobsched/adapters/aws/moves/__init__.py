"""Moving a stage onto new tables with the stack live: a key at a time on first touch, the rest by a copier."""
