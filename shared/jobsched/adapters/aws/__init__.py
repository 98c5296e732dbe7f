"""AWS access: one store module per table, one adapter per target type, lazily built clients."""
