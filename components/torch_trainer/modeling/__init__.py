"""The user's model: its feature layout and spec, the factory that builds it, the export heads, the zoo."""
