"""The user's model: the spec it is built from, the factory that builds it, the export heads, the zoo."""
