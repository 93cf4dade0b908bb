"""The ground floor: the shared data model, the one writer, the readers of untrusted input, git, globs,
process scopes, serialisation, configuration and shipped-data lookup. Imports nothing above it."""
